"""Attack: the code under test passes its own slowness off as a busy host.

Honest time limits (issue 20) tell "the artifact took too long" (a scored 0) from "the host was
busy" (an error verdict, which resume grades again). The second must not be something the
artifact can claim: a policy that learns to make its failing runs look starved never sees a 0.
A test that sleeps, waits on an event or stops itself past its limit used no CPU and waited for
none: a scored timeout. So is one that starves one of its own processes with CPU burnt where
per-process accounting does not see it: children auto-reaped (``SIGCHLD`` ignored) add their CPU
time to no parent's ``cutime``, and a ``nice 19`` spinner beside them waits on the run queue as
if the host were busy. As root the sandbox's CPU cgroup counts their CPU; without one the
runner counts it (a ``perf`` task clock every process it starts inherits, reaped or not), and
where neither can, a starved test is a scored timeout (``test_attack_busy_host.py``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from proofgym.verify.sandboxed.program import run_pytest
from tests.conftest import require_tool

# it loads the host on purpose: run alone, after the parallel part of the suite (.ci/run)
pytestmark = [pytest.mark.sandbox, pytest.mark.serial]

#: A spawner keeps ~6 short-lived busy children (each spins 50 ms) running, all auto-reaped;
#: the test process itself spins at nice 19 behind them.
_HIDDEN_SPINNERS = """
import os, signal, time

def double(x):
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by nobody's wait()
    if os.fork() == 0:
        while True:
            if os.fork() == 0:
                end = time.monotonic() + 0.05
                while time.monotonic() < end:
                    pass
                os._exit(0)
            time.sleep(0.008)
    os.nice(19)
    while True:
        pass
"""

#: The same with many more children at once (~48): enough to keep even the runner, which
#: only wakes briefly, waiting in the sandbox's own CPU group; the group's CPU accounting (as
#: root) still sees every cycle they burn.
_MANY_HIDDEN_SPINNERS = _HIDDEN_SPINNERS.replace("time.sleep(0.008)", "time.sleep(0.001)")

#: The same, and the witness silenced: the runner (this process's parent, same uid) is given
#: ``nice 19``, so it would wait behind the hidden spinners every time it wakes, as it would on
#: a busy host (the test processes' seccomp filter refuses it now: it goes on regardless).
_SLOWS_THE_RUNNER = _HIDDEN_SPINNERS.replace(
    "    os.nice(19)\n",
    "    try:\n        os.setpriority(os.PRIO_PROCESS, os.getppid(), 19)\n"
    "    except PermissionError:\n        pass\n    os.nice(19)\n")

#: The many spinners' spawner orphaned first (a double fork): the sandbox's init is its parent.
_ORPHANED_SPINNERS = _MANY_HIDDEN_SPINNERS.replace(
    "    if os.fork() == 0:\n        while True:",
    "    if os.fork() == 0:\n        if os.fork():\n            os._exit(0)\n        while True:")

STALLS = {
    "sleeps": "import time\n\n\ndef double(x):\n    time.sleep(3600)\n",
    "waits_on_an_event": "import threading\n\n\ndef double(x):\n    threading.Event().wait()\n",
    "stops_itself": ("import os\nimport signal\n\n\ndef double(x):\n"
                     "    os.kill(os.getpid(), signal.SIGSTOP)\n"),
    "blocks_on_a_pipe": "import os\n\n\ndef double(x):\n    r, w = os.pipe()\n    os.read(r, 1)\n",
    "starves_its_own_spinner": _HIDDEN_SPINNERS,
    "starves_it_with_many_spinners": _MANY_HIDDEN_SPINNERS,
    "starves_the_runner_too": _SLOWS_THE_RUNNER,
    "starves_it_with_orphaned_spinners": _ORPHANED_SPINNERS,
}


@pytest.fixture
def snap(tmp_path: Path) -> Path:
    root = tmp_path / "snap"
    (root / "tests").mkdir(parents=True)
    (root / "m.py").write_text("def double(x):\n    return x + 2\n")
    (root / "tests" / "test_m.py").write_text(
        "from m import double\n\n\ndef test_double():\n    assert double(3) == 6\n")
    return root


@pytest.mark.parametrize("stall", sorted(STALLS))
def test_a_test_that_stalls_past_its_limit_is_a_scored_timeout_not_a_busy_host(snap: Path, stall: str):
    require_tool("bwrap")
    # a 0.5 s limit: the stall's verdict comes at the limit (or at its backstop, 4 times it),
    # and the serial part of the suite waits for each of the 8, as root and as an ordinary user
    run = run_pytest(snap, {"m.py": STALLS[stall].encode()}, tests=["tests/test_m.py::test_double"],
                     timeout_s=60, test_timeout_s=0.5, mutants=False)
    # a scored 0: a timeout, or tampering for a test that reniced the runner it cannot undo
    want = ("tests_timed_out", "tampering_detected") if stall == "starves_the_runner_too" else (
        "tests_timed_out",)
    assert run.failure in want and not getattr(run, "starved", False), (
        f"a test that {stall.replace('_', ' ')} past its limit is not a scored timeout: "
        f"failure={run.failure} results={run.results} {run.report_error}")
    assert run.timings["total_s"] < 45, run.timings
