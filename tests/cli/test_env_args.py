"""``--env-arg KEY=VALUE`` for ``proofgym eval`` and ``validate`` (typed by the env factory's
signature), and ``validate``'s concurrency, progress lines, failure file and wall time."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import orjson
import pytest

from proofgym.cli.env_args import EnvArgError, parse_env_args
from tests.conftest import REPO

TYPED_ENV = textwrap.dedent('''
    import gymnasium
    from pathlib import Path
    from proofgym import InProcessRuntime, Task, TaskSet, TaskSpec, TurnCompleteAction, UniversalVerifiableEnv

    SEEN = {}

    class Echo(Task):
        def __init__(self, i, answer, hedge):
            self.i, self.answer, self.hedge = i, answer, hedge
        @property
        def id(self):
            return f"echo-{self.i}"
        def get_spec(self):
            return TaskSpec(f"Say {self.answer}.")
        def verify(self, trace, runtime):
            message = trace.final_message() or ""
            return float(self.answer in message if self.hedge else message == self.answer)
        def reference_solution(self):
            return [TurnCompleteAction(self.answer)]
        def controls(self):
            return {"hedge": [TurnCompleteAction(f"{self.answer} or not {self.answer}")]}

    def make_env(n: int = 3, answer: str = "yes", hedge: bool = False, scale: float = 1.0,
                 out: Path | None = None, tags: list[str] | None = None, extra=None):
        SEEN.update(n=n, answer=answer, hedge=hedge, scale=scale, out=out, tags=tags, extra=extra)
        return UniversalVerifiableEnv(InProcessRuntime([]), max_turns=1,
                                      tasks=TaskSet(Echo(i, answer, hedge) for i in range(n)))

    if "Typed-v0" not in gymnasium.registry:
        gymnasium.register("Typed-v0", entry_point=make_env)
''')


@pytest.fixture
def typed_env(tmp_path: Path, monkeypatch) -> Path:
    (tmp_path / "typed_env.py").write_text(TYPED_ENV)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{cwd}", "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "proofgym", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_values_are_typed_by_the_factory_signature(typed_env: Path) -> None:
    kwargs = parse_env_args("typed_env:Typed-v0", [
        "n=5", "answer=42", "hedge=true", "scale=0.5", "out=/tmp/x", "tags=[\"a\", \"b\"]",
        "extra={\"k\": 1}"])
    assert kwargs == {"n": 5, "answer": "42", "hedge": True, "scale": 0.5, "out": Path("/tmp/x"),
                      "tags": ["a", "b"], "extra": {"k": 1}}
    assert type(kwargs["answer"]) is str  # "42" stays a string for a str parameter
    assert parse_env_args("typed_env:Typed-v0", ["out=none", "extra=plain words"]) == \
        {"out": None, "extra": "plain words"}
    # a bundled env: through its wrapper, to the real factory's hints
    assert parse_env_args("proofgym/Arith-v0", ["n_tasks=7", "use_calculator=no"]) == \
        {"n_tasks": 7, "use_calculator": False}


@pytest.mark.parametrize(("arg", "message"), [
    ("nn=5", r"no such parameter; its factory make_env accepts: n, answer, hedge, scale, out"),
    ("n=five", r"n='five': expected int"),
    ("hedge=maybe", r"expected a bool"),
    ("tags=[a", r"given as JSON"),
    ("n", r"expected KEY=VALUE"),
])
def test_bad_env_args_are_usage_errors(typed_env: Path, arg: str, message: str) -> None:
    with pytest.raises(EnvArgError, match=message):
        parse_env_args("typed_env:Typed-v0", [arg])
    proc = cli(typed_env, "validate", "typed_env:Typed-v0", "--env-arg", arg)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and re.search(message, " ".join(proc.stderr.split()))


def test_eval_passes_env_args_and_records_them(typed_env: Path) -> None:
    out = typed_env / "run"
    proc = cli(typed_env, "eval", "typed_env:Typed-v0", "--env-arg", "n=4", "--env-arg", "answer=ok",
               "--out", str(out), "--verifier", "inline")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = orjson.loads((out / "summary.json").read_bytes())
    assert summary["episodes"] == 4 and summary["mean_reward"] == 1.0
    contract = orjson.loads((out / "contract.json").read_bytes())
    assert contract["env"]["kwargs"] == {"n": 4, "answer": "ok"}
    bad = cli(typed_env, "eval", "typed_env:Typed-v0", "--env-arg", "n=x", "--out", str(typed_env / "r2"))
    assert bad.returncode == 2 and "expected int" in bad.stderr and not (typed_env / "r2").exists()


def test_validate_concurrency_progress_and_wall_time(typed_env: Path) -> None:
    proc = cli(typed_env, "validate", "typed_env:Typed-v0", "--env-arg", "n=10", "-c", "3",
               "--json", "v.json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "validating typed_env:Typed-v0: 10 tasks" in proc.stdout  # not a terminal: plain lines
    assert "validated 10/10 tasks" in proc.stdout
    assert re.search(r"grader validation passed: 10 tasks, \d+ checks, in [\d.]+ s wall time at "
                     r"concurrency 3", proc.stdout)
    report = orjson.loads((typed_env / "v.json").read_bytes())
    assert report["concurrency"] == 3 and report["wall_time_s"] > 0 and report["tasks"] == 10
    assert report["env_kwargs"] == {"n": 10}


def test_every_failure_is_listed_or_written_to_a_named_file(typed_env: Path) -> None:
    few = cli(typed_env, "validate", "typed_env:Typed-v0", "--env-arg", "hedge=true", "-c", "2")
    assert few.returncode == 1
    assert all(f"FAIL control:hedge · echo-{i}: scored 1, expected 0" in few.stdout for i in range(3))
    many = cli(typed_env, "validate", "typed_env:Typed-v0", "--env-arg", "hedge=true",
               "--env-arg", "n=25", "-c", "2")
    assert many.returncode == 1
    found = re.search(r"25 failures: every one is listed in (\S+)", " ".join(many.stdout.split()))
    assert found, many.stdout
    listed = Path(found.group(1)).read_text().splitlines()
    assert sorted(listed) == sorted(f"FAIL control:hedge · echo-{i}: scored 1, expected 0"
                                    for i in range(25))
    Path(found.group(1)).unlink()
    assert "grader validation FAILED: control:hedge" in many.stdout


def test_concurrent_validation_gives_the_same_report(typed_env: Path) -> None:
    from proofgym.eval.validate import validate

    one = validate("typed_env:Typed-v0", env_kwargs={"n": 6, "hedge": True}, concurrency=1).to_dict()
    three = validate("typed_env:Typed-v0", env_kwargs={"n": 6, "hedge": True}, concurrency=3).to_dict()
    assert three["concurrency"] == 3 and one["concurrency"] == 1
    for report in (one, three):
        report.pop("wall_time_s"), report.pop("concurrency")
    assert one["env_kwargs"] == {"n": 6, "hedge": True}
    assert one == three and not one["ok"]
