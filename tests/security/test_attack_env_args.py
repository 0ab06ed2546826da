"""Attack: smuggle code through ``--env-arg KEY=VALUE`` (a value from a job script or a sweep
config someone else wrote).

Values are parsed as data only: ``int``/``float``/``bool``/``str``/``Path`` by the factory's
annotation, JSON (orjson) otherwise. A value that is Python source, a pickle, a ``module:attr``
reference or a JSON object naming ``__class__`` stays that text or that plain data: nothing is
evaluated, imported or unpickled, and a key the factory does not take is refused.
"""

from __future__ import annotations

import base64
import pickle
import secrets
import sys
from pathlib import Path
from typing import Any

import gymnasium
import pytest

from proofgym.cli.env_args import EnvArgError, parse_env_args

_MARK = Path("/tmp") / f"proofgym-env-arg-{secrets.token_hex(6)}"


class _Touch:
    def __reduce__(self):
        return (Path.touch, (_MARK,))


def _factory(anything=None, data: Any = None, path: Path | None = None, count: int = 1):
    raise AssertionError("parsing must not build the env")


@pytest.fixture(scope="module")
def env_id() -> str:
    name = f"AttackEnvArgs-{secrets.token_hex(4)}-v0"
    gymnasium.register(name, entry_point=_factory)
    yield name
    gymnasium.registry.pop(name, None)


def test_env_arg_values_are_data_never_code(env_id: str):
    code = f"__import__('pathlib').Path('{_MARK}').touch()"
    pickled = base64.b64encode(pickle.dumps(_Touch())).decode()
    modules = set(sys.modules)
    got = parse_env_args(env_id, [f"anything={code}", f"data={{\"__class__\": \"{code}\"}}",
                                  "path=os:system", "count=1"])
    assert got == {"anything": code, "data": {"__class__": code}, "path": Path("os:system"),
                   "count": 1}
    assert parse_env_args(env_id, [f"anything={pickled}"]) == {"anything": pickled}
    assert not _MARK.exists()
    assert set(sys.modules) - modules == set()  # nothing was imported to read a value
    for bad in (f"count={code}", "count=1e400", "__init__=1", "render_mode=human",
                "count=" + "9" * 5000):
        with pytest.raises(EnvArgError):
            parse_env_args(env_id, [bad])
    assert not _MARK.exists()
