"""Attack: read a hidden test, or the original code, from a stale copy the sdist ships.

A RepoRepair task's workspace is the project's whole sdist with the bug patch applied and the
fail-to-pass tests stripped from their file. Sdists carry leftovers: funcy 2.0 ships
``tests/test_decorators.py.orig`` (a working copy with merge markers), which holds two of the
five hidden tests of its release-history task ``funcy-20db45c716`` verbatim
(``test_chain_arg_access``, ``test_double_decorator_defaults``); an ``x.py.orig`` or ``.bak``
of a source file would hold the code the patch replaced (the fix). The agent reads the
workspace: ``cat tests/test_decorators.py.orig`` shows the hidden tests.

Defence: building the task (:func:`proofgym.tasks.synth.manifest.build_task_dir`) leaves out of
the workspace every file that is not a Python module and holds a hidden test's source or the
lines the patch replaces (their context included); Python modules holding them are the
project's code (a vendored copy, another parser's test of the same cases) and stay.
"""

from __future__ import annotations

from pathlib import Path

from proofgym.tasks.synth.manifest import TaskRecord, build_task_dir
from proofgym.tasks.synth.patch import make_patch
from proofgym.tasks.synth.recipe import ProjectPin

_SOURCE = b'''def scale(values, factor):
    """Each value times factor."""
    out = []
    for value in values:
        out.append(value * factor)
    return out
'''
_BUGGY = _SOURCE.replace(b"value * factor", b"value + factor")
_TESTS = b'''from pkg.m import scale


def test_empty():
    assert scale([], 3) == []


@pytest.mark.parametrize("factor", [2, 5])
def test_scales_each_value(factor):
    got = scale([1, 2, 3], factor)
    assert got == [factor, 2 * factor, 3 * factor]
'''.replace(b"from pkg", b"import pytest\n\nfrom pkg")
_HIDDEN = "tests/test_m.py::test_scales_each_value"
_HIDDEN_TEXT = b"    got = scale([1, 2, 3], factor)\n    assert got == [factor, 2 * factor, 3 * factor]\n"


def _tree(top: Path, extra: dict[str, bytes]) -> None:
    for path, content in {"pkg/__init__.py": b"", "pkg/m.py": _SOURCE, "tests/test_m.py": _TESTS,
                          "README.md": b"scale values\n", **extra}.items():
        (top / path).parent.mkdir(parents=True, exist_ok=True)
        (top / path).write_bytes(content)


def _build(tmp_path: Path, extra: dict[str, bytes]) -> Path:
    top = tmp_path / "sdist"
    _tree(top, extra)
    record = TaskRecord("pkg-1", "pkg", "1.0", 1, (), 0, make_patch({"pkg/m.py": (_SOURCE, _BUGGY)}),
                        (_HIDDEN,), (), "scale", "scale adds", origin="release 0.9->1.0")
    build_task_dir(tmp_path / "task", top, record, ProjectPin("pkg", "1.0", "0" * 64, source=("pkg",)))
    return tmp_path / "task" / "repo"


def _holding(repo: Path, needle: bytes) -> list[str]:
    return sorted(str(p.relative_to(repo)) for p in repo.rglob("*")
                  if p.is_file() and needle in p.read_bytes())


def test_a_stale_copy_of_a_test_file_does_not_show_the_hidden_test(tmp_path: Path):
    repo = _build(tmp_path, {"tests/test_m.py.orig": _TESTS, "tests/test_m.py~": _TESTS,
                             "docs/tests.txt": b"Our tests:\n\n" + _TESTS})
    assert _HIDDEN_TEXT in (tmp_path / "task" / "hidden" / "tests" / "test_m.py").read_bytes()
    assert _holding(repo, _HIDDEN_TEXT) == []
    assert (repo / "tests" / "test_m.py").is_file() and (repo / "README.md").is_file()
    assert b"def test_empty" in (repo / "tests" / "test_m.py").read_bytes()


def test_a_stale_copy_of_a_source_file_does_not_show_the_original_code(tmp_path: Path):
    repo = _build(tmp_path, {"pkg/m.py.orig": _SOURCE, "pkg/m.py.bak": _SOURCE})
    assert _holding(repo, b"value * factor") == []
    assert b"value + factor" in (repo / "pkg" / "m.py").read_bytes()


def test_a_python_module_holding_the_same_code_stays(tmp_path: Path):
    """A vendored copy is the project's own code, which its tests may import: it stays (a
    policy may read it, as a maintainer would)."""
    repo = _build(tmp_path, {"pkg/vendored.py": _SOURCE})
    assert _holding(repo, b"value * factor") == ["pkg/vendored.py"]


def test_an_sdist_s_bytecode_does_not_reach_the_workspace(tmp_path: Path):
    """funcy 1.17's sdist ships ``tests/__pycache__/*.pyc`` (its tests, the ones a task hides
    among them, compiled) and astor 0.8.1's ``astor/__pycache__/*.cpython-311.pyc`` (the
    original code, compiled): none of an sdist's bytecode is in the workspace."""
    import marshal

    tests_pyc = b"\0" * 16 + marshal.dumps(compile(_TESTS, "tests/test_m.py", "exec"))
    source_pyc = b"\0" * 16 + marshal.dumps(compile(_SOURCE, "pkg/m.py", "exec"))
    repo = _build(tmp_path, {"tests/__pycache__/test_m.cpython-311-pytest-8.3.5.pyc": tests_pyc,
                             "pkg/__pycache__/m.cpython-311.pyc": source_pyc, "pkg/m.pyc": source_pyc})
    assert b"test_scales_each_value" in tests_pyc and b"value" in source_pyc
    assert sorted(str(p.relative_to(repo)) for p in repo.rglob("*") if p.is_file()) == [
        "README.md", "pkg/__init__.py", "pkg/m.py", "pytest.ini", "tests/test_m.py"]
