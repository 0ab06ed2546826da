"""The snapshot's bytecode, compiled on the host for the grading sandbox, never stands in for
code the artifact changed."""

from __future__ import annotations

from pathlib import Path

import pytest

from proofgym.verify.sandboxed.bytecode import pyc_path, snapshot_bytecode, staged_bytecode
from proofgym.verify.sandboxed.program import run_pytest
from tests.conftest import require_tool

pytestmark = pytest.mark.sandbox


@pytest.fixture
def snap(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "mod.py").write_text("def f():\n    return 1\n")
    (tmp_path / "pkg" / "other.py").write_text("def g():\n    return 3\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_m.py").write_text(
        "import os\n\nimport pkg.other\nfrom pkg.mod import f\n\n\n"
        "def test_f():\n    assert f() == 2\n\n\n"
        "def test_other_from_bytecode():\n    assert os.path.exists(pkg.other.__cached__)\n")
    return tmp_path


def test_a_changed_module_runs_as_changed_an_unchanged_one_from_the_staged_bytecode(snap: Path):
    """The artifact's ``pkg/mod.py`` (same size, so only the source hash tells it apart) is what
    the test runs, though the snapshot's bytecode of the old one is staged beside it; the
    untouched ``pkg/other.py`` is imported with its staged ``.pyc`` there."""
    require_tool("bwrap")
    tests = ["tests/test_m.py::test_f", "tests/test_m.py::test_other_from_bytecode"]
    run = run_pytest(snap, {"pkg/mod.py": b"def f():\n    return 2\n"}, tests=tests,
                     mutants=False, timeout_s=60)
    assert run.results == {t: "passed" for t in tests}, run.output
    unfixed = run_pytest(snap, {}, tests=tests, mutants=False, timeout_s=60)
    assert unfixed.results["tests/test_m.py::test_f"] == "failed"


def test_no_bytecode_is_staged_where_the_artifact_wrote(snap: Path):
    """A source the artifact changed or deleted gets none, and none goes under a path it
    replaced (``pkg`` turned into a file); test files and conftests get none either."""
    (snap / "conftest.py").write_text("")
    compiled = snapshot_bytecode(snap, ("test", str(snap)))
    assert {source for source, _ in compiled.values()} == {"pkg/__init__.py", "pkg/mod.py",
                                                           "pkg/other.py"}
    assert set(staged_bytecode(compiled, ["pkg/mod.py"])) == {pyc_path("pkg/__init__.py"),
                                                              pyc_path("pkg/other.py")}
    assert staged_bytecode(compiled, ["pkg"]) == {}
