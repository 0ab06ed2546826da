"""Synthesis end to end on a tiny sdist built in the test: real sandboxes, the real grader."""

from __future__ import annotations

import pytest

from proofgym.envs.repo_repair import check_record
from proofgym.tasks.synth import FetchError, ProjectSynth, apply_patch, fetch_sdist, materialize
from proofgym.tasks.synth.discover import list_test_functions
from proofgym.tasks.synth.hiding import strip_tests
from proofgym.tasks.synth.release_names import orphaned_names
from tests.conftest import require_tool
from tests.tasks.synth_helpers import MODULE, TESTS, build_sdist, demo_pin


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PROOFGYM_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_fetch_verifies_the_pinned_hash_and_caches(tmp_path, cache):
    sdist, sha = build_sdist(tmp_path / "index")
    got = fetch_sdist("pgdemo", "0.1", sha, sdist.as_uri(), quiet=True)
    assert got.parent == cache / "sdists" and got.read_bytes() == sdist.read_bytes()
    sdist.unlink()  # cached: no second download
    assert fetch_sdist("pgdemo", "0.1", sha, sdist.as_uri(), quiet=True) == got
    other, _ = build_sdist(tmp_path / "index2", version="0.2")
    with pytest.raises(FetchError, match="differs from the pinned"):
        fetch_sdist("pgdemo", "0.2", sha.replace(sha[0], "0" if sha[0] != "0" else "1", 1),
                    other.as_uri(), quiet=True)
    assert not list((cache / "sdists").glob(".part-*"))


def test_hidden_tests_are_stripped_whole_and_nothing_else():
    ids = ["tests/test_pgdemo.py::test_clamp_above", "tests/test_pgdemo.py::test_mean_empty"]
    stripped = strip_tests(TESTS.encode(), ids)
    left = list_test_functions("tests/test_pgdemo.py", stripped)
    assert set(left) == set(list_test_functions("tests/test_pgdemo.py", TESTS.encode())) - set(ids)
    assert b"clamp(50, 0, 10)" not in stripped and b"mean([])" not in stripped
    assert b"def test_clamp_inside" in stripped
    with pytest.raises(ValueError, match="not defined"):
        strip_tests(TESTS.encode(), ["tests/test_pgdemo.py::test_nothing"])


def test_a_task_the_grader_cannot_guard_is_counted_unguarded_not_a_disagreement(tmp_path, cache):
    """The release-history and synthesis reports say why the grader refused a task: one whose
    hidden tests have no mutant or withheld check (parse 1.22.1->1.22.2: its test's asserts sit
    in a helper it calls) is ``unguarded``; any other refusal (a pass-to-pass test failing with
    the bug, a reference fix scoring 0) is ``grader_disagrees``."""
    from concurrent.futures import Future
    from types import SimpleNamespace

    from proofgym.tasks.synth.pipeline import UNGUARDED

    synth = ProjectSynth(demo_pin(tmp_path / "index"), quiet=True)
    for problem in (f"{UNGUARDED}: tests/test_pgdemo.py::test_mean (the bug's grading)",
                    "with the bug: fail-to-pass passing [], pass-to-pass not passing ['t::x']"):
        done: Future = Future()
        done.set_result((False, problem, {}))
        assert synth._finish(SimpleNamespace(), SimpleNamespace(id="pgdemo-x"), done) is None
    assert synth.report.rejected == {"unguarded": 1, "grader_disagrees": 1}


@pytest.mark.slow
def test_synthesis_keeps_only_valid_tasks_and_is_deterministic(tmp_path, cache):
    require_tool("bwrap")
    pin = demo_pin(tmp_path / "index")
    checked = []

    def validate(record):
        checked.append(record.id)
        return check_record(record, pin)

    report = ProjectSynth(pin, validate=validate, quiet=True).run()
    assert report.stable_tests == 8
    records = report.records
    assert len(records) >= 3 and {r.tier for r in records} == {1, 2}, report.to_dict()
    assert [r.id for r in records] == [i for i in checked if i in {r.id for r in records}]
    for record in records:
        assert 1 <= len(record.fail_to_pass) <= 5 and record.pass_to_pass
        assert not set(record.fail_to_pass) & set(record.pass_to_pass)
        # pass-to-pass: the whole stable suite less the failing tests
        assert len(record.pass_to_pass) + len(record.fail_to_pass) == report.stable_tests
        assert record.stats["grading_s"] > 0
        # the patch is the bug: applied to the pristine module it gives the task's module
        root = materialize(record, pin)
        buggy = apply_patch({"pgdemo/__init__.py": MODULE.encode()}, record.patch)
        assert (root / "repo" / "pgdemo" / "__init__.py").read_bytes() == buggy["pgdemo/__init__.py"]
        assert (root / "solution" / "pgdemo" / "__init__.py").read_text() == MODULE
        visible = (root / "repo" / "tests" / "test_pgdemo.py").read_bytes()
        for node in record.fail_to_pass:
            assert f"def {node.rsplit('::', 1)[1]}(".encode() not in visible
            assert node.rsplit("::", 1)[1] not in record.bug_report  # nor its name
        assert b"assert " not in record.bug_report.encode()  # never a line of a test
    # the same pin and seed give the same candidates in the same order
    again = ProjectSynth(pin, quiet=True)
    first = ProjectSynth(pin, quiet=True)
    assert [c.changes for c in _candidates(first)] == [c.changes for c in _candidates(again)]
    other = ProjectSynth(demo_pin(tmp_path / "index", seed=1), quiet=True)
    assert [c.changes for c in _candidates(other)] != [c.changes for c in _candidates(first)]


def test_a_drop_that_leaves_a_name_read_but_unbound_is_no_candidate(tmp_path, cache):
    # dropping `out = []` from chunks leaves `out` read and bound nowhere: a NameError no
    # release could ship, whatever failure a broad except makes of it (python-json-logger's
    # formatStack without `stack_info_str = ...` failed as a JSONDecodeError, so the
    # NameError check of the failures missed it)
    synth = ProjectSynth(demo_pin(tmp_path / "index"), quiet=True)
    candidates = _candidates(synth)
    assert synth.report.rejected.get("orphaned_name", 0) >= 1, synth.report.rejected
    assert not [c.sites for c in candidates for path, (old, new) in c.changes.items()
                if orphaned_names(old, new, path)]
    assert all(b"    out = []\n" in new or b"out.append" not in new
               for c in candidates for _, new in c.changes.values())


def _candidates(synth: ProjectSynth):
    # the call map a baseline would record: every test calls every function of the module
    from proofgym.tasks.synth.discover import list_test_files

    synth.files = list_test_files(synth.top, synth.pin.tests)
    tests = list_test_functions(synth.files[0], (synth.top / synth.files[0]).read_bytes())
    synth.stable = tests
    keys = {f"pgdemo/__init__.py:{line}:{name}" for line, name in
            ((1, "clamp"), (9, "chunks"), (16, "title_words"), (20, "mean"))}
    synth.callers = {k: set(tests) for k in keys}
    synth.at_import = frozenset()
    return synth._build(synth._candidates())
