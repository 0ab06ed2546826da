"""Attack: tell a decoy from a hidden test by its place in the grading's job.

Every test process is forked from the grading's runner, so it holds the runner's state: the
job's generated test files by path (their contents zeroed), in the order the host sent them.
The host sent the hidden tests' files (real and mutant, shuffled), then the decoys' (mutants
of visible tests, each run in a process of its own among the hidden tests'), then the
canaries'. Code under test that finds that dict on its stack, finds its own file there (the one
generated file on disk while its process runs) and is among the last of the files that are not
the batch's knows it runs a decoy: it stays honest there and forges a pass everywhere else.
A hidden test no mutant or withheld check guards (``mutants=False`` here; in a task, a test in
``TestRun.unguarded``) then passes unfixed while the decoys, the only check of such a forger,
fail honestly. Knowing nothing of the task.

Defence: the host sends the generated files in the order of their fresh random paths, which
says nothing of what each one is.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from proofgym.verify.sandboxed.program import run_pytest
from tests.conftest import require_tool
from tests.security.test_attack_forged_batch import _BUGGY, _VISIBLE, F2P, P2P

pytestmark = pytest.mark.sandbox

_JOB = """
import os
import sys


def _job():
    frame = sys._getframe()
    while frame is not None:
        names = frame.f_locals
        if isinstance(names.get("tests"), dict) and isinstance(names.get("manifest"), dict):
            return list(names["tests"]), names["manifest"]
        frame = frame.f_back
    return None, None
"""
_FORGER = _JOB + """
import _pytest.reports as _reports

_made = _reports.TestReport.from_item_and_call.__func__


def _decoy_or_batch():
    files, manifest = _job()
    if files is None:
        return True
    batch = {n.split("::", 1)[0] for n in manifest.get("batch", ())}
    mine = [f for f in files if os.path.exists("/workspace/" + f)]
    if not mine or mine[0] in batch:
        return True
    alone = [f for f in files if f not in batch]
    return mine[0] in alone[-2:]


def _forged(cls, item, call):
    report = _made(cls, item, call)
    if not _decoy_or_batch():
        report.outcome, report.longrepr = "passed", None
    return report


_reports.TestReport.from_item_and_call = classmethod(_forged)
"""

#: the hidden test: no mutant (``mutants=False``), no literal to withhold
_HIDDEN = b"from app import add\n\n\ndef test_add():\n    assert add(2, 3) == add(3, 2)\n"



def _grade(tmp_path: Path, app: str):
    (tmp_path / "app.py").write_text(_BUGGY)
    (tmp_path / "tests").mkdir(exist_ok=True)
    (tmp_path / "tests" / "test_visible.py").write_text(_VISIBLE)
    return run_pytest(tmp_path, {"app.py": app.encode()}, tests=[*F2P, *P2P], batch=P2P,
                      hidden={"tests/test_hidden.py": _HIDDEN}, mutants=False, timeout_s=60,
                      test_timeout_s=20)


def test_the_job_sends_the_generated_files_in_the_order_of_their_paths(tmp_path: Path):
    """What the forger above reads (measured before the defence: it paid in 3 of 3 gradings,
    the hidden test passed unfixed, both decoys failed honestly): the order of the generated
    files a test process finds in its runner's state. It is the order of their paths, which
    are fresh and random: it tells a decoy from a hidden test no better than a coin."""
    require_tool("bwrap")
    app = _JOB + """

def add(a, b):
    files, _ = _job()
    if files is not None:
        raise AssertionError("ORDER " + "|".join(files).encode().hex())
    return a - b


def mul(a, b):
    return a * b
"""
    run = _grade(tmp_path, app)
    assert run.decoys == 2 and not run.guarded, (run.decoys, run.guarded)
    message = run.messages.get(F2P[0], "")
    assert "ORDER " in message, (run.results, message)
    seen = bytes.fromhex(message.rsplit("ORDER ", 1)[1].split()[0]).decode().split("|")
    assert len(seen) >= 3, seen  # the hidden test's file, the decoys', the canaries'
    assert seen == sorted(seen), seen
