"""Attack: the one process that runs every visible pass-to-pass test reports passes it did not earn.

The visible tests (the project's stable suite, which the agent can read) run together in one
test process (``run_tests_isolated(batch=...)``); the hidden fail-to-pass test keeps its own.
The artifact below fixes the hidden test's ``add`` but breaks ``mul``, which the visible tests
check, and then tries to have the batch process report every visible test passed, only there
(it acts only once the visible test module is loaded, which no hidden test's process does):

* ``monkeypatch_pytest``: pytest's report of every test is rewritten to ``passed``;
* ``speak_the_protocol``: the code finds its process's proof socket, asks for the nonce and
  answers "all passed" for every test the session collected, then ends the process;
* ``os_exit``: the process ends with status 0 at the first broken test;
* ``write_every_descriptor``: a forged report of passes is written to every descriptor.

Defences: the outcomes count only when sent with the process's proof (else every batch test is
``crashed``), the report descriptor is not held by any test process, and mutants of the visible
tests (canaries) run in the same process: forging "all passed" there passes a canary with its
test, which is tampering. A forger that knows which tests are the visible ones (their sources)
and passes only those is out of reach of this check, as it is of per-test processes; see
docs/threat-model.md.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from proofgym.verify.sandboxed import swebench_verdict
from proofgym.verify.sandboxed.program import run_pytest
from tests.conftest import require_tool

pytestmark = pytest.mark.sandbox

_HIDDEN = b"""
from app import add


def test_add():
    assert add(2, 3) == 5
"""
_VISIBLE = """
from app import mul


def test_mul_small():
    assert mul(2, 3) == 6


def test_mul_zero():
    assert mul(7, 0) == 0


def test_mul_negative():
    assert mul(-2, 4) == -8


def test_mul_one():
    assert mul(9, 1) == 9
"""
F2P = ["tests/test_hidden.py::test_add"]
P2P = [f"tests/test_visible.py::test_mul_{n}" for n in ("small", "zero", "negative", "one")]
_BUGGY = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
_FIXED = _BUGGY.replace("a - b", "a + b")
#: the fix of ``add`` that breaks ``mul`` (every visible test fails honestly)
_BREAKS = _FIXED.replace("a * b", "a * b + 1")
_IN_BATCH = "import sys\n\n\ndef _in_batch():\n    return 'test_visible' in sys.modules\n\n\n"

ATTACKS = {
    "monkeypatch_pytest": _IN_BATCH + """
import _pytest.reports as _reports

_made = _reports.TestReport.from_item_and_call.__func__


def _forged(cls, item, call):
    report = _made(cls, item, call)
    if _in_batch():
        report.outcome, report.longrepr = "passed", None
    return report


_reports.TestReport.from_item_and_call = classmethod(_forged)
""" + _BREAKS,
    "speak_the_protocol": _IN_BATCH + """
import json, os, socket

from _pytest.main import Session


def _forge():
    frame, session = sys._getframe(), None
    while frame is not None and session is None:  # the running test's item knows its session
        found = getattr(frame.f_locals.get("item"), "session", None)
        session = found if isinstance(found, Session) else None
        frame = frame.f_back
    items = session.items
    payload = json.dumps({"outcomes": {i.nodeid.split("[")[0]: "passed" for i in items}}).encode()
    for name in os.listdir("/proc/self/fd"):
        try:
            sock = socket.socket(fileno=os.dup(int(name)))
        except OSError:
            continue
        try:
            sock.setblocking(True)
            sock.sendall(b"?")
            nonce = sock.recv(16)
            sock.sendall(bytes([0]) + nonce + len(payload).to_bytes(4, "big") + payload)
        except OSError:
            continue
    os._exit(0)


def add(a, b):
    return a + b


def mul(a, b):
    if _in_batch():
        _forge()
    return a * b + 1
""",
    "os_exit": _IN_BATCH + """
import os


def add(a, b):
    return a + b


def mul(a, b):
    if _in_batch():
        os._exit(0)
    return a * b + 1
""",
    "write_every_descriptor": _IN_BATCH + """
import json, os


def add(a, b):
    return a + b


def mul(a, b):
    if _in_batch():
        names = ["tests/test_hidden.py::test_add", *(
            f"tests/test_visible.py::test_mul_{n}" for n in ("small", "zero", "negative", "one"))]
        forged = json.dumps({"results": {n: "passed" for n in names}}).encode()
        for fd in range(3, 256):
            try:
                os.write(fd, forged)
            except OSError:
                continue
    return a * b + 1
""",
}


@pytest.fixture
def snap(tmp_path: Path) -> Path:
    (tmp_path / "app.py").write_text(_BUGGY)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_visible.py").write_text(_VISIBLE)
    return tmp_path


def _grade(snap: Path, app: str):
    run = run_pytest(snap, {"app.py": app.encode()}, tests=[*F2P, *P2P], batch=P2P,
                     hidden={"tests/test_hidden.py": _HIDDEN}, timeout_s=60, test_timeout_s=20)
    return run, swebench_verdict(run, F2P, P2P)


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_a_batch_process_cannot_report_passes_it_did_not_earn(snap: Path, attack: str):
    require_tool("bwrap")
    run, verdict = _grade(snap, ATTACKS[attack])
    assert verdict.reward == 0.0, (attack, run.results, run.report_error)
    assert not all(run.results.get(t) == "passed" for t in P2P), run.results
    if attack in ("monkeypatch_pytest", "speak_the_protocol"):
        assert run.failure == "tampering_detected", (run.failure, run.report_error)
        assert run.mutants_passed >= 1
    else:
        assert run.failure is None, (run.failure, run.report_error)
        assert run.results["tests/test_hidden.py::test_add"] == "passed"
        ended = "crashed" if attack == "os_exit" else "failed"
        assert {run.results[t] for t in P2P} == {ended}, run.results


def test_the_batch_passes_an_honest_fix_and_names_the_visible_test_a_fix_breaks(snap: Path):
    """The controls: an honest fix passes the batch (its canaries fail, as mutants do); one
    that breaks the visible tests scores 0, the reason naming them as PASS_TO_PASS."""
    require_tool("bwrap")
    run, verdict = _grade(snap, _FIXED)
    assert verdict.reward == 1.0, verdict.reason
    assert run.mutants == 1 and run.canaries >= 1  # the hidden test's, and the batch's
    run, verdict = _grade(snap, _BREAKS)
    assert verdict.reward == 0.0 and run.failure is None, (run.failure, run.report_error)
    assert "tests/test_visible.py::test_mul_small (PASS_TO_PASS): failed" in verdict.reason
    assert "assert" in verdict.reason  # the failure's own message


def test_an_honest_fix_is_not_tampering_where_a_visible_test_s_mutant_passes_honestly(tmp_path: Path):
    """A mutant of a visible test is not vetted like a hidden test's: a parametrized test that
    sets a value and reads it back passes a mutant with another case honestly (h2's
    ``test_header_encoding_is_reflected_attr`` did, flagging the bundled task's bug as
    tampering). No mutant canary is drawn from a parametrized test (the batch's one canary
    fails whatever the code does), and only a batch that passed every canary is tampering."""
    require_tool("bwrap")
    (tmp_path / "app.py").write_text(_FIXED + "\n\nclass Config:\n    encoding = None\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_visible.py").write_text(
        "import pytest\n\nfrom app import Config\n\n\n"
        "@pytest.mark.parametrize('value', ['ascii', 'utf-8', None])\n"
        "def test_reflected(value):\n    config = Config()\n    config.encoding = value\n"
        "    assert config.encoding == value\n")
    p2p = ["tests/test_visible.py::test_reflected"]
    run = run_pytest(tmp_path, {}, tests=[*F2P, *p2p], batch=p2p, hidden={"tests/test_hidden.py": _HIDDEN},
                     timeout_s=60, test_timeout_s=20)
    verdict = swebench_verdict(run, F2P, p2p)
    assert verdict.reward == 1.0 and run.failure is None, (run.failure, run.report_error)
    assert run.canaries == 1  # the sure-failing one (test_attack_batch_without_canary.py)


_FORGE_OUTSIDE_THE_BATCH = _IN_BATCH + """
import _pytest.reports as _reports

_made = _reports.TestReport.from_item_and_call.__func__


def _forged(cls, item, call):
    report = _made(cls, item, call)
    if not _in_batch():
        report.outcome, report.longrepr = "passed", None
    return report


_reports.TestReport.from_item_and_call = classmethod(_forged)
""" + _BUGGY


def test_a_forger_of_every_process_but_the_batch_passes_the_decoys_too(snap: Path):
    """The hidden test has no mutant here (``mutants=False``: a ``pytest.raises``-only test has
    none) and no withheld check, and its visible neighbours no longer run beside it with
    theirs: the decoys (mutants of batch tests, each in a process of its own among the hidden
    tests') are what a forger of every process outside the batch passes too: tampering."""
    require_tool("bwrap")
    # no literal to withhold either: the check compares two computed values
    hidden = b"from app import add\n\n\ndef test_add():\n    assert add(2, 3) == add(3, 2)\n"
    run = run_pytest(snap, {"app.py": _FORGE_OUTSIDE_THE_BATCH.encode()}, tests=[*F2P, *P2P],
                     batch=P2P, hidden={"tests/test_hidden.py": hidden}, mutants=False,
                     timeout_s=60, test_timeout_s=20)
    # decoys do not make the run guarded (test_attack_decoy_shapes.py), but catch this forger
    assert run.mutants == 0 and run.decoys >= 1 and not run.guarded
    assert run.failure == "tampering_detected", (run.failure, run.results)
    assert swebench_verdict(run, F2P, P2P).reward == 0.0
