"""Attack: a forger of the pass-to-pass batch that knows nothing of the task tells the canaries
from the real tests by their files.

The batch (every visible pass-to-pass test in one process, in a native run's order, each file
collected whole) carries up to 3 canaries: mutants of its tests, fixed per task, each alone in a
freshly named file written just before the batch runs. A forger that reports every test passed
passes them too, which is tampering (``test_attack_forged_batch.py``). The artifact below fixes
the hidden test's ``add``, breaks ``mul`` (every visible test fails honestly) and forges a pass
only for a test whose file looks like the project's own, leaving the canaries honest:

* ``several_tests``: the test's module defines more than one test (a canary's holds one);
* ``older_than_my_code``: the test's file changed before the code under test's own file (the
  project's test files come from the snapshot, the artifact's files are written as the grading
  starts, a canary's file just before the batch).

Neither rule names a test, a file or a value of the task: the same lines void the regression
check of any task. ``docs/threat-model.md`` lists this under the batch's "Not defended"
(closing it needs the real tests to run from fresh files too, the originals out of the
workspace): the tests are strict xfails that say so, and turn red once that is done.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from proofgym.verify.sandboxed import swebench_verdict
from proofgym.verify.sandboxed.program import run_pytest
from tests.conftest import require_tool
from tests.security.test_attack_forged_batch import _BREAKS, _HIDDEN, _VISIBLE, F2P, P2P

pytestmark = pytest.mark.sandbox

_FORGE = """
import os

import _pytest.reports as _reports

_made = _reports.TestReport.from_item_and_call.__func__


def _looks_real(item):
    if RULE == "several_tests":
        return sum(n.startswith("test") for n in vars(item.module)) > 1
    return os.stat(str(item.path)).st_ctime_ns < os.stat(__file__).st_ctime_ns


def _forged(cls, item, call):
    report = _made(cls, item, call)
    if _looks_real(item):
        report.outcome, report.longrepr = "passed", None
    return report


_reports.TestReport.from_item_and_call = classmethod(_forged)
"""


@pytest.mark.xfail(strict=True, reason="docs/threat-model.md, the batch's 'Not defended': a "
                   "canary's file tells it apart (one test in it, written by the runner)")
@pytest.mark.parametrize("rule", ["several_tests", "older_than_my_code"])
def test_a_task_blind_forger_that_leaves_the_canaries_honest_is_caught(tmp_path: Path, rule: str):
    require_tool("bwrap")
    (tmp_path / "app.py").write_text(_BREAKS)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_visible.py").write_text(_VISIBLE)
    app = f"RULE = {rule!r}\n" + _FORGE + _BREAKS
    run = run_pytest(tmp_path, {"app.py": app.encode()}, tests=[*F2P, *P2P], batch=P2P,
                     hidden={"tests/test_hidden.py": _HIDDEN}, timeout_s=60, test_timeout_s=20)
    assert run.canaries >= 1 and run.report_error is None, (run.canaries, run.report_error)
    assert swebench_verdict(run, F2P, P2P).reward == 0.0, (run.results, run.failure)
