"""``synth`` says up front, in one line, why a project gives no tasks, instead of screening."""

from __future__ import annotations

import pytest

from proofgym.tasks.synth import ProjectSynth
from proofgym.verify.sandboxed import guarded_tests
from tests.conftest import require_tool
from tests.tasks.synth_helpers import TESTS, demo_pin

#: tests that run the code but check nothing a mutant or a withheld literal could guard
UNGUARDED = "from pgdemo import clamp, mean\n\n\ndef test_runs():\n    clamp(1, 0, 2)\n"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PROOFGYM_CACHE", str(tmp_path / "cache"))


@pytest.mark.parametrize(("tests", "why"), [
    (UNGUARDED, "no test function has a mutable or withholdable check"),
    ("import pgdemo\n\n\ndef helper():\n    assert pgdemo.clamp(1, 0, 2) == 1\n", "no test function"),
])
def test_a_project_that_can_give_no_task_is_refused_in_one_line_before_its_baseline(
        tmp_path, cache, capsys, tests, why):
    pin = demo_pin(tmp_path / "index", tests=tests)
    report = ProjectSynth(pin, quiet=False, guard=guarded_tests).run()  # no sandbox: refused first
    assert report.refused is not None and report.refused.startswith(why)
    assert report.tried == 0 and report.records == [] and report.to_dict()["refused"] == report.refused
    said = [line for line in capsys.readouterr().err.splitlines() if "gives no tasks" in line]
    assert said == [f"proofgym synth: pgdemo: gives no tasks: {report.refused}"]


def test_the_guard_finds_the_guarded_tests_of_a_project_that_has_them():
    sources = {"tests/test_pgdemo.py": TESTS.encode(), "tests/test_u.py": UNGUARDED.encode()}
    ids = ["tests/test_pgdemo.py::test_clamp_below", "tests/test_pgdemo.py::test_mean_empty",
           "tests/test_u.py::test_runs"]
    assert guarded_tests(sources, ids) == set(ids[:2])
    assert guarded_tests({"tests/test_u.py": UNGUARDED.encode()}, ids[2:], first=True) == set()


def test_the_refusal_check_reads_the_smallest_test_files_first():
    # idna's 1.4 MB generated test file took the check minutes (each of its 6,000 tests is
    # isolated from a copy of the whole module); a small file that has a guarded test answers it.
    # The big file's listed test is not in it: building its layout would raise.
    big = UNGUARDED + "".join(f"\n\ndef test_case_{i}():\n    assert {i} == {i}\n" for i in range(200))
    for name in ("tests/test_a.py", "tests/test_z.py"):
        sources = {"tests/test_pgdemo.py": TESTS.encode(), name: big.encode()}
        ids = ["tests/test_pgdemo.py::test_clamp_below", f"{name}::test_not_there"]
        assert guarded_tests(sources, ids, first=True) == {ids[0]}


def test_a_project_whose_tests_all_fail_is_refused_for_having_no_stable_test(tmp_path, cache):
    require_tool("bwrap")
    failing = "from pgdemo import clamp\n\n\ndef test_clamp():\n    assert clamp(5, 0, 2) == 5\n"
    report = ProjectSynth(demo_pin(tmp_path / "index", tests=failing), quiet=True,
                          guard=guarded_tests).run()
    # the listing's wording ("pytest's rules, read from the test files") is not why: the runs are
    assert report.refused == "no stable test (one that passes in 3 of 3 runs)"
