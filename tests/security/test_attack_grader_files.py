"""Attack: displace a grader's file in ``run_pytest`` (the twin of the ``run_program`` case in
``test_attack_run_program.py``).

The grader's hidden files include helpers besides the tests (expected data, a fixture module). The
artifact deletes one, writes its own under that name, puts a directory where it goes, or a file
where its directory goes. The grader's files must win in every case: the hidden test sees the
grader's data, and the run is graded on the code under test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from proofgym.verify.sandboxed.program import run_pytest
from tests.conftest import require_tool

pytestmark = pytest.mark.sandbox

_HIDDEN = {
    "tests/test_h.py": b"from app import add\nfrom checks.data import CASES\n\n\n"
                       b"def test_add():\n    for a, b, want in CASES:\n        assert add(a, b) == want\n",
    "checks/data.py": b"CASES = [(2, 3, 5), (0, 0, 0)]\n",
}
_TEST = ["tests/test_h.py::test_add"]


@pytest.mark.parametrize("changes", [
    {"checks/data.py": None},
    {"checks/data.py": b"CASES = []\n"},  # an empty table: every test would pass
    {"checks/data.py/x.py": b"CASES = []\n"},
    {"checks": b"not a directory\n"},
    {"checks": None},
])
def test_the_artifact_cannot_displace_a_graders_helper_file(tmp_path: Path, changes):
    require_tool("bwrap")
    (tmp_path / "app.py").write_text("def add(a, b):\n    return a - b\n")
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "data.py").write_text("CASES = []\n")  # the snapshot's stub
    (tmp_path / "checks" / "__init__.py").write_text("")
    wrong = run_pytest(tmp_path, changes, tests=_TEST, hidden=_HIDDEN, mutants=False, timeout_s=60)
    assert wrong.results == {_TEST[0]: "failed"}, (wrong, wrong.messages)
    fixed = dict(changes, **{"app.py": b"def add(a, b):\n    return a + b\n"})
    right = run_pytest(tmp_path, fixed, tests=_TEST, hidden=_HIDDEN, mutants=False, timeout_s=60)
    assert right.results == {_TEST[0]: "passed"}, (right, right.messages)
