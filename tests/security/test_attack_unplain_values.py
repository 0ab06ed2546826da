"""Checks whose value is an object: the reference fix passes, the literals stay out of reach.

A hidden assert comparing a computed value with a literal is withheld: the test process sends
the value, the host compares. hyperframe's ``f.flags == set()`` computes a ``Flags`` object (a
set-like class, equal to a set): no plain data, so the check failed for the reference fix too
(``hyperframe-39ada7c73a`` scored 0). Such a check stays an assert, listed in the task's record
(``TaskRecord.unwithheld``, found by its reference run); the test's other checks stay withheld.
The attacks below, with the bug unfixed, show that a check beside a kept one still hides its
literal from the code under test, and that returning objects does not unwithhold a check.
"""

from __future__ import annotations

import pytest

from proofgym.verify.sandboxed import files_under, swebench_verdict
from tests.conftest import require_tool
from tests.envs.repo_repair_helpers import offline_task
from tests.security.test_attack_expected_values import _without_withholding

pytestmark = pytest.mark.sandbox

#: Its one hidden test checks ``f.flags == set()`` (kept: an object), ``f.additional_data ==
#: b'hello'`` (the input's own bytes) and ``f.body_len == 13`` (withheld) twice over.
_TASK = "hyperframe-39ada7c73a"
_TEST = "tests/test_frames.py::TestGoAwayFrame::test_goaway_frame_parses_properly"
_FRAME = "src/hyperframe/frame.py"

#: Fix the bug only where the caller's file or frames show the expected body length (13): a
#: forger that could read a withheld literal would pass, one that cannot keeps the bug.
_READS_THE_LITERAL = b'''

import sys as _pg_sys

_pg_parse_body = GoAwayFrame.parse_body


def _pg_sees_13():
    frame = _pg_sys._getframe(2)
    while frame is not None:
        try:
            with open(frame.f_code.co_filename, "rb") as f:
                if b"== 13" in f.read():
                    return True
        except OSError:
            pass
        if any(type(c) is int and c == 13 for c in frame.f_code.co_consts):
            return True
        frame = frame.f_back
    return False


def _pg_forged(self, data):
    if _pg_sees_13():
        self.last_stream_id, self.error_code = _STRUCT_LL.unpack(data[:8])
        self.body_len = len(data)
        if len(data) > 8:
            self.additional_data = data[8:].tobytes()
        return None
    return _pg_parse_body(self, data)


GoAwayFrame.parse_body = _pg_forged
'''

#: Make every value the test checks an object equal to anything: were the grader to stop
#: withholding a check whose value is no plain data, it would pass.
_RETURNS_OBJECTS = b'''

class _PgAnything:
    def __eq__(self, other):
        return True

    __hash__ = object.__hash__


def _pg_forged(self, data):
    self.last_stream_id = self.error_code = 0
    self.body_len = _PgAnything()
    self.additional_data = _PgAnything()


GoAwayFrame.parse_body = _pg_forged
'''


def _grade(task, changes):
    run = task.grade_files(changes)
    return run, swebench_verdict(run, task.record.fail_to_pass, task.record.pass_to_pass)


def test_the_reference_fix_of_a_task_that_compares_objects_scores_1(tmp_path, monkeypatch):
    """Red on main before the fix: the kept check was withheld and its ``Flags`` value failed
    it ("a Flags object is not plain data"), reward 0.0."""
    require_tool("bwrap")
    task = offline_task(_TASK, tmp_path / "cache", monkeypatch)
    assert dict(task.record.unwithheld) == {_TEST: ("f.flags",)}
    run, verdict = _grade(task, files_under(task.root / "solution"))
    assert verdict.reward == 1.0, (verdict.reason, run.report_error)
    assert run.unplain == {} and _TEST in run.withheld  # its other checks are still withheld
    run, verdict = _grade(task, {})
    assert verdict.reward == 0.0 and run.results[_TEST] == "failed", verdict.reason


@pytest.mark.parametrize("withheld", [True, False])
def test_a_literal_beside_a_kept_check_stays_out_of_reach(tmp_path, monkeypatch, withheld):
    """With the bug unfixed, code that fixes it only where it can see the expected ``13``:
    withheld, 0; with the literals in the file (the positive control), 1.0, unflagged."""
    require_tool("bwrap")
    task = offline_task(_TASK, tmp_path / "cache", monkeypatch)
    if not withheld:
        _without_withholding(monkeypatch)
    source = (task.inner.repo / _FRAME).read_bytes()
    run, verdict = _grade(task, {_FRAME: source + _READS_THE_LITERAL})
    assert run.failure is None, (run.failure, run.report_error)
    assert verdict.reward == (0.0 if withheld else 1.0), verdict.reason


def test_values_that_are_objects_do_not_unwithhold_a_check(tmp_path, monkeypatch):
    """The task's list comes from its record, not from the run: checks whose value the code
    under test makes an object equal to anything still fail, as no plain data."""
    require_tool("bwrap")
    task = offline_task(_TASK, tmp_path / "cache", monkeypatch)
    source = (task.inner.repo / _FRAME).read_bytes()
    run, verdict = _grade(task, {_FRAME: source + _RETURNS_OBJECTS})
    assert verdict.reward == 0.0 and run.results[_TEST] == "failed", verdict.reason
    assert set(run.unplain[_TEST]) == {"f.additional_data", "f.body_len"}, run.unplain


def test_the_synthesis_gate_lists_the_checks_its_reference_run_cannot_send(tmp_path, monkeypatch):
    """A new record (no list yet): ``check_record`` finds the check from the reference grading,
    accepts the task with it and returns the list the record keeps."""
    require_tool("bwrap")
    from dataclasses import replace

    from proofgym.envs.repo_repair import check_record

    task = offline_task(_TASK, tmp_path / "cache", monkeypatch)
    record = replace(task.record, unwithheld={})
    ok, problem, _, found = check_record(record, task.pin, cache_root=tmp_path / "tasks")
    assert (ok, problem, found) == (True, None, {_TEST: ("f.flags",)})
