"""Attack: file names that are not UTF-8.

Linux file names are bytes. A name such as ``$'\\xff\\xfe'`` must survive ``snapshot()``, the
artifact's JSON form and the run record, and come back as the same bytes; it must never abort
the run (one such file used to abort a whole evaluation).
"""

from __future__ import annotations

import os

import orjson
import pytest

from proofgym.record.trajectory import Trajectory
from proofgym.runtimes.artifact import Artifact
from tests.security.conftest import bash

pytestmark = pytest.mark.sandbox

_NAMES = [b"\xff\xfe", b"dir\xe9/caf\xe9.py", b"ok-\xed\xa0\x80-surrogate", b"tab\tand\nnewline"]


def _as_bytes(name: str | bytes) -> bytes:
    return name if isinstance(name, bytes) else os.fsencode(name)


def _make_files(rt) -> None:
    script = "; ".join(
        f"mkdir -p \"$(dirname -- $'{_esc(n)}')\" && printf %s {i} > $'{_esc(n)}'"
        for i, n in enumerate(_NAMES))
    r = bash(rt, script + "; ls -R | od -c | head -3")
    assert r.ok, r


def _esc(name: bytes) -> str:
    return "".join(f"\\x{b:02x}" for b in name)


def test_non_utf8_names_survive_snapshot_and_serialisation(rt):
    _make_files(rt)
    art = rt.snapshot()
    got = {_as_bytes(k): v for k, v in art.files.items()}
    assert got == {n: str(i).encode() for i, n in enumerate(_NAMES)}, got
    data = orjson.loads(orjson.dumps(art.to_dict()))
    back = Artifact.from_dict(data)
    assert {_as_bytes(k): v for k, v in back.files.items()} == got
    assert back.digest == art.digest


def test_non_utf8_names_survive_the_run_record(rt):
    _make_files(rt)
    art = rt.snapshot()
    traj = Trajectory(trajectory_id="t", env_id="e", task_id="k", task_hash="h", seed=0,
                      policy={}, prompt="p", tools=[], artifact=art.to_dict())
    again = Trajectory.from_dict(orjson.loads(traj.to_json()))
    files = Artifact.from_dict(again.artifact).files
    assert {_as_bytes(k) for k in files} == set(_NAMES), files
