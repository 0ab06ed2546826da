"""Attack: a forger that knows nothing of the task, on a batch no mutant canary can be drawn for.

The batch's canaries are mutants of its visible tests, never of a parametrized one (an honest
fix may pass a mutant that changes a case's input), so a stable suite made only of
parametrized tests (or of tests no mutant can be built for) had none, nor any decoy (4 of the
648 bundled tasks: first's 2, tabulate's 1 and one of inflection's 9). There, code under test
that reports every test of a session with more than one item as passed (a test process of its
own runs one) needs no knowledge of the task and scored 1.0 with the stable test it breaks failing.

Defence: a batch with no mutant canary gets one that fails whatever the code under test does
(a copy of one of its tests that fails first): a process reporting passes it did not earn
passes it with its test, which is tampering; an honest process never passes it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from proofgym.verify.sandboxed import swebench_verdict
from proofgym.verify.sandboxed.isolated import _canaries
from proofgym.verify.sandboxed.program import run_pytest
from tests.conftest import require_tool

pytestmark = pytest.mark.sandbox

_HIDDEN = b"""
from app import add


def test_add():
    assert add(2, 3) == 5
"""
#: only parametrized tests: no mutant canary is drawn from them
_VISIBLE = """
import pytest

from app import mul


@pytest.mark.parametrize("a, b, want", [(2, 3, 6), (7, 0, 0), (-2, 4, -8)])
def test_mul(a, b, want):
    assert mul(a, b) == want


@pytest.mark.parametrize("a", [1, 5, 9])
def test_mul_one(a):
    assert mul(a, 1) == a
"""
F2P = ["tests/test_hidden.py::test_add"]
P2P = ["tests/test_visible.py::test_mul", "tests/test_visible.py::test_mul_one"]
_BUGGY = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
_FIXED = _BUGGY.replace("a - b", "a + b")
#: knows nothing of the task: a session of more than one item is the batch
_FORGER = """
import _pytest.reports as _reports

_made = _reports.TestReport.from_item_and_call.__func__


def _forged(cls, item, call):
    report = _made(cls, item, call)
    if len(item.session.items) > 1:
        report.outcome, report.longrepr = "passed", None
    return report


_reports.TestReport.from_item_and_call = classmethod(_forged)
""" + _FIXED.replace("a * b", "a * b + 1")


def _grade(tmp_path: Path, app: str):
    (tmp_path / "app.py").write_text(_BUGGY)
    (tmp_path / "tests").mkdir(exist_ok=True)
    (tmp_path / "tests" / "test_visible.py").write_text(_VISIBLE)
    run = run_pytest(tmp_path, {"app.py": app.encode()}, tests=[*F2P, *P2P], batch=P2P,
                     hidden={"tests/test_hidden.py": _HIDDEN}, timeout_s=60, test_timeout_s=20)
    return run, swebench_verdict(run, F2P, P2P)


def test_a_task_blind_forger_is_caught_where_no_mutant_canary_can_be_drawn(tmp_path: Path):
    require_tool("bwrap")
    run, verdict = _grade(tmp_path, _FORGER)
    assert verdict.reward == 0.0, (run.results, run.report_error)
    assert run.failure == "tampering_detected", (run.failure, run.report_error)
    assert run.canaries == 1


def test_the_sure_failing_canary_lets_an_honest_fix_pass(tmp_path: Path):
    require_tool("bwrap")
    run, verdict = _grade(tmp_path, _FIXED)
    assert verdict.reward == 1.0, verdict.reason
    assert run.canaries == 1 and run.failure is None


def test_the_sure_failing_canary_is_drawn_from_a_test_its_file_defines():
    """A test a file imports from another (``from tests.test_base import test_a``) has no body
    there to fail first: the canary is drawn from another test, or there is none."""
    base = b"import pytest\n\n\n@pytest.mark.parametrize('x', [1, 2])\ndef test_a(x):\n    assert x\n"
    sources = {"tests/test_imp.py": b"from tests.test_base import test_a\n", "tests/test_base.py": base}
    alone = _canaries(sources, ["tests/test_imp.py::test_a"], [], None, b"seed", 3, sure_failing=True)
    assert alone.run == []
    both = _canaries(sources, ["tests/test_imp.py::test_a", "tests/test_base.py::test_a"], [], None,
                     b"seed", 3, sure_failing=True)
    (gen,) = both.run
    assert both.mutant[gen] == "tests/test_base.py::test_a"
    assert "assert False\n    assert x" in both.files[gen.split("::", 1)[0]].decode()
