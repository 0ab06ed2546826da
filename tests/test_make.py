"""One env builder (``proofgym.make.make_env``): every road that builds an env from an id and
keyword arguments gives the same clear error for the same bad input. (The CLI's roads, with exit
code 2 and no traceback, are cases of tests/cli/test_errors.py.)"""

from __future__ import annotations

import functools
import pickle
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from proofgym.cli.env_args import EnvArgError, parse_env_args
from proofgym.core import ConfigError, EnvBuildError, EnvNotFoundError
from proofgym.env import UniversalVerifiableEnv
from proofgym.eval import evaluate, validate
from proofgym.integrations.trl import dataset, environment_factory
from proofgym.make import env_factory, make_env, takes_tasks
from proofgym.rollout import ReferencePolicy
from tests.conftest import run_cli

ARITH = "proofgym/Arith-v0"

#: Every library road that builds an env from (id, kwargs).
ROADS: dict[str, Callable[..., Any]] = {
    "make_env": lambda source, **kw: make_env(source, **kw),
    "evaluate": lambda source, **kw: evaluate(source, ReferencePolicy(), env_kwargs=kw, verifier="inline"),
    "validate": lambda source, **kw: validate(source, env_kwargs=kw, verifier="inline"),
    "trl.environment_factory": lambda source, **kw: environment_factory(source, **kw),
    "trl.dataset": lambda source, **kw: dataset(source, "train", **kw),
}

#: (source, kwargs, error type, words the message must hold)
BAD = [
    ("nosuchmodule:Foo-v0", {}, EnvBuildError,
     "cannot import module 'nosuchmodule' for environment 'nosuchmodule:Foo-v0': No module named "
     "'nosuchmodule'"),
    ("proofgym/Nope-v0", {}, EnvNotFoundError, "unknown environment 'proofgym/Nope-v0'"),
    ("json:Foo-v0", {}, EnvNotFoundError, "proofgym's environments: proofgym/Arith-v0"),
    (ARITH, {"n_tasks": 0}, EnvBuildError,
     "environment 'proofgym/Arith-v0' rejected its arguments (n_tasks=0): TaskSet 'arith-s0' is empty"),
    (ARITH, {"bogus": 1}, EnvBuildError,
     "make_env() got an unexpected keyword argument 'bogus'; its factory accepts: n_tasks, seed"),
]


@pytest.mark.parametrize("road", list(ROADS))
@pytest.mark.parametrize(("source", "kwargs", "kind", "says"), BAD, ids=[f"{s}{k}" for s, k, *_ in BAD])
def test_every_road_gives_the_same_error(road: str, source: str, kwargs: dict[str, Any],
                                         kind: type[Exception], says: str) -> None:
    with pytest.raises(kind) as caught:
        ROADS[road](source, **kwargs)
    message = str(caught.value)
    assert says in message, message
    assert "was raised from the environment creator" not in message  # the factory's own words
    assert isinstance(caught.value, ConfigError)  # a usage error: the CLI exits 2
    # and the very same message on every road
    with pytest.raises(EnvBuildError) as direct:
        make_env(source, **kwargs)
    assert str(direct.value) == message


def test_a_factory_that_returns_no_proofgym_env_is_named() -> None:
    def not_an_env(n: int = 1) -> object:
        return object()

    for road in ("make_env", "trl.environment_factory"):
        with pytest.raises(EnvBuildError, match=r"not_an_env built a object, not a proofgym "
                                                r"UniversalVerifiableEnv"):
            ROADS[road](not_an_env)
    with pytest.raises(EnvBuildError, match=r"rejected its arguments \(m=2\).*its factory accepts: n$"):
        make_env(not_an_env, m=2)
    with pytest.raises(EnvBuildError, match="expected an env id"):
        make_env(42)  # type: ignore[arg-type]


def test_env_args_share_the_builder_and_its_errors() -> None:
    assert issubclass(EnvArgError, EnvBuildError)
    with pytest.raises(EnvBuildError, match="cannot import module 'nosuchmodule'"):
        parse_env_args("nosuchmodule:Foo-v0", ["n=1"])
    with pytest.raises(EnvNotFoundError, match="unknown environment 'proofgym/Nope-v0'"):
        parse_env_args("proofgym/Nope-v0", ["n=1"])
    assert env_factory(ARITH).__qualname__ == "make_env"  # through the bundled wrapper
    assert takes_tasks(ARITH) and not takes_tasks("proofgym/Nope-v0")


def test_the_remote_slot_factory_is_the_builder_and_pickles() -> None:
    # Ray slot actors get functools.partial(make_env, id, **kwargs) and build where they run
    factory = pickle.loads(pickle.dumps(functools.partial(make_env, ARITH, n_tasks=3)))
    env = factory()
    try:
        assert isinstance(env, UniversalVerifiableEnv) and len(env.tasks) == 3
    finally:
        env.close()


def test_verify_on_a_machine_without_the_env_module_says_so(tmp_path: Path) -> None:
    """``proofgym verify`` rebuilds the run's env through the same builder: a run of
    ``module:Env-v0`` re-graded where the module is missing names the module, no traceback."""
    (tmp_path / "pg_local_env.py").write_text(textwrap.dedent("""
        import gymnasium
        from proofgym.envs.arith import make_env
        gymnasium.register("Local-v0", entry_point=make_env)
    """))
    run = tmp_path / "run"
    made = run_cli("eval", "pg_local_env:Local-v0", "--env-arg", "n_tasks=2", "--out", str(run),
                   "--verifier", "inline", cwd=tmp_path, check=False)
    assert made.returncode == 0, made.stdout + made.stderr
    (tmp_path / "pg_local_env.py").unlink()
    proc = run_cli("verify", str(run), cwd=tmp_path, check=False)
    out = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode == 2 and "Traceback" not in out, out
    assert "cannot import module 'pg_local_env' for environment 'pg_local_env:Local-v0'" in out, out
