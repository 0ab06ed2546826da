"""Attack: be graded by a runner booted for another snapshot.

A snapshot graded again gets a spare runner for its next grading, booted over its *path*. When that path
is given a different tree before the spare is used (a task set rebuilt in place, a temporary
directory reused by the next task, a snapshot directory replaced by a fresh checkout), the spare
still holds the old tree: code the new snapshot does not have (here: a correct solution) would be
graded. A spare must only ever serve the snapshot it was booted over.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from proofgym.verify.sandboxed.isolated import _identity
from proofgym.verify.sandboxed.program import run_pytest
from proofgym.verify.sandboxed.warm_runners import WARM
from tests.conftest import require_tool

pytestmark = pytest.mark.sandbox

_HIDDEN = {"tests/test_hidden.py": b"from app import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"}
_TEST = ["tests/test_hidden.py::test_add"]


def _write(root: Path, body: str) -> None:
    root.mkdir()
    (root / "app.py").write_text(body)
    (root / "tests").mkdir()


def _spares_for(root: Path) -> int:
    """Spares booted for the tree now at ``root`` (a key starts with the tree's identity)."""
    identity = _identity(root.resolve())
    with WARM._lock:
        return sum(len(rs) for key, rs in WARM._spares.items() if key[0] == identity)


def _graded_twice(root: Path, outcome: str) -> None:
    """Grade the tree at ``root`` twice (a snapshot graded again gets a spare), then wait for
    its spare."""
    for _ in range(2):
        run = run_pytest(root, {}, tests=_TEST, hidden=_HIDDEN, mutants=False, timeout_s=60)
        assert run.results == {_TEST[0]: outcome}, run
    deadline = time.monotonic() + 30
    while not _spares_for(root) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _spares_for(root), f"no spare was booted ({WARM.last_boot_error})"


def test_a_spare_never_serves_a_snapshot_replaced_at_its_path(tmp_path: Path):
    require_tool("bwrap")
    if WARM.max_spares < 1:
        pytest.skip("spares are turned off (PROOFGYM_GRADING_SPARES=0)")
    root = tmp_path / "snapshot"
    _write(root, "def add(a, b):\n    return a + b\n")
    _graded_twice(root, "passed")  # a spare holds this tree: its add is right

    root.rename(tmp_path / "old")  # the same path, another task's tree: its add is wrong
    _write(root, "def add(a, b):\n    return a - b\n")
    second = run_pytest(root, {}, tests=_TEST, hidden=_HIDDEN, mutants=False, timeout_s=60)
    assert second.results == {_TEST[0]: "failed"}, second

    _graded_twice(root, "failed")  # and once more with the tree deleted under its spare
    shutil.rmtree(root)
    _write(root, "def add(a, b):\n    return a * b\n")
    third = run_pytest(root, {}, tests=_TEST, hidden=_HIDDEN, mutants=False, timeout_s=60)
    assert third.results == {_TEST[0]: "failed"}, third
