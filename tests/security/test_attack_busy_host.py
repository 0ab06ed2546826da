"""Attack: a busy neighbour makes a correct solution time out, a scored 0.

The grading runner timed each test in wall time, so a host kept busy by another sandbox (the
issue's 64 busy loops under ``setsid``: each its own autogroup, so the grading gets a sliver of
a CPU) turned a correct answer into "timed out". The runner now counts a test's *own* time
(wall time less the time its processes waited for a CPU) and lets a starved test run on up to
its backstop; still starved there, the run is ``starved`` and the verdict a grader error.

The starvation here is real and deterministic: the grading is pinned to one CPU, and 40 busy
loops, each in a session of its own (kernel autogroup gives each session an equal share), are
pinned to the same CPU once the grading's runner is booted. (Should the sandbox get a CPU share
of its own that outweighs them, the honest fix passes instead: also never a 0.) No privilege
is needed, so this runs as root and as an ordinary user. On an idle host a test that sleeps or
spins past its limit is still a scored timeout.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from proofgym.verify.sandboxed import swebench_verdict
from proofgym.verify.sandboxed.program import run_pytest
from tests.conftest import REPO, require_tool

# it loads the host on purpose: run alone, after the parallel part of the suite (.ci/run)
pytestmark = [pytest.mark.sandbox, pytest.mark.serial]

#: A correct test that needs 0.3 s of CPU: well inside its 1 s limit on an idle host.
_WORK = b"""
import time


def test_work():
    start = time.process_time()
    while time.process_time() - start < 0.3:
        pass
    assert 2 + 3 == 5
"""

#: The grading, in a process pinned to one CPU (its sandboxes inherit the affinity): two first
#: gradings boot a spare runner, then, once the CPU is busy, the graded one takes the spare.
_GRADER = r"""
import json, os, sys, time
from proofgym.verify.sandboxed.program import run_pytest
from proofgym.verify.sandboxed.warm_runners import WARM

snap, cpu = sys.argv[1], int(sys.argv[2])
os.sched_setaffinity(0, {cpu})
if sys.argv[4] == "refused":  # the sandbox's filter refuses perf_event_open, as paranoid 3 would
    from proofgym.runtimes.sandbox import bwrap
    real = bwrap.seccomp.program_fd
    bwrap.seccomp.program_fd = lambda contain_sessions=False, count_own_cpu=False: real(contain_sessions)
ids = ["tests/test_w.py::test_work"]
hidden = {"tests/test_w.py": open(sys.argv[3], "rb").read()}
for _ in range(2):  # a snapshot graded again gets a spare
    first = run_pytest(snap, {}, tests=ids, hidden=hidden, mutants=False, timeout_s=30, test_timeout_s=10)
    assert first.results == {ids[0]: "passed"}, (first.results, first.report_error)
deadline = time.monotonic() + 120
while not any(k[0][0] == snap for k in WARM._spares) and time.monotonic() < deadline:
    time.sleep(0.05)  # listed once it has loaded pytest and said it is ready
assert any(k[0][0] == snap for k in WARM._spares), f"no spare runner was booted: {WARM.last_boot_error}"
print("ready", flush=True)
sys.stdin.readline()
t0 = time.monotonic()
run = run_pytest(snap, {}, tests=ids, hidden=hidden, mutants=False, timeout_s=3, test_timeout_s=1)
print(json.dumps({"results": run.results, "failure": run.failure, "starved": getattr(run, "starved", None),
                  "report_error": run.report_error, "wall": time.monotonic() - t0}), flush=True)
"""


def _measured(count: str) -> bool:
    """Whether the grading sandbox's CPU use is measured: as root by its cgroup; otherwise by
    the runner's count, which the host allows up to ``perf_event_paranoid`` 2."""
    if os.geteuid() == 0:
        return True
    paranoid = int(Path("/proc/sys/kernel/perf_event_paranoid").read_text())
    return count == "counted" and paranoid <= 2


def _hog(cpu: int) -> int:
    """A busy loop pinned to ``cpu``, in a session (so an autogroup) of its own."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            os.sched_setaffinity(0, {cpu})
            while True:
                pass
        finally:
            os._exit(1)
    return pid


@pytest.mark.parametrize("count", ["counted", "refused"])
def test_a_grading_starved_by_a_busy_host_is_a_grader_error_never_a_zero(tmp_path: Path, count: str):
    """Where the sandbox's CPU is measured (its cgroup as root; the runner's count otherwise).
    Where it is not (no cgroup, and the count refused: ``perf_event_paranoid`` 3, as Debian
    ships it), the starved test is a scored timeout that says why: hidden processes of the code
    under test could have kept it waiting just the same (``test_attack_starvation_claims.py``)."""
    require_tool("bwrap")
    cpu = max(os.sched_getaffinity(0))
    snap = tmp_path / "snap"
    (snap / "tests").mkdir(parents=True)
    (tmp_path / "work.py").write_bytes(_WORK)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    grader = subprocess.Popen([sys.executable, "-c", _GRADER, str(snap), str(cpu),
                               str(tmp_path / "work.py"), count], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env, cwd=REPO,
                              start_new_session=True)
    hogs: list[int] = []
    try:
        assert grader.stdout is not None and grader.stdin is not None
        assert grader.stdout.readline().strip() == "ready"
        hogs = [_hog(cpu) for _ in range(40)]
        time.sleep(0.5)
        grader.stdin.write("go\n")
        grader.stdin.flush()
        line = grader.stdout.readline()
    finally:
        for pid in hogs:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        grader.kill()
        grader.wait()
    assert line, "the grading process ended without a result"
    run = json.loads(line)
    if run["results"] == {"tests/test_w.py::test_work": "passed"}:
        # a CPU share of the grading's own (a cgroup cpu.weight per sandbox) outweighed the
        # hogs: the honest fix passed, which is as good; never a scored timeout
        assert run["failure"] is None and run["starved"] is False, run
        return
    if not _measured(count):  # no cgroup, and no count of the sandbox's processes
        assert run["failure"] == "tests_timed_out" and run["starved"] is False, run
        assert run["results"] == {} and "was not measured" in run["report_error"], run
        assert run["wall"] < 3 * 4 + 20, run
        return
    assert run["failure"] == "host_busy" and run["starved"] is True, run
    assert run["results"] == {} and "too busy" in run["report_error"], run
    assert run["wall"] < 3 * 4 + 20, run  # the backstop ends it, not the host's own deadline


def test_the_starved_verdict_is_a_grader_error_never_a_zero():
    from proofgym.verify.sandboxed import TestRun

    run = TestRun({}, 0, False, "the host was too busy to judge", False, "", failure="host_busy",
                  starved=True)
    verdict = swebench_verdict(run, ["t::a"], [])
    assert verdict.status == "error" and "too busy" in (verdict.error or "")
    assert not verdict.scored  # consumers must not average it in as a zero


@pytest.mark.parametrize("body", ["time.sleep(5)", "while True:\n        pass"],
                         ids=["sleeps", "spins"])
def test_a_test_past_its_limit_on_an_idle_host_is_still_a_scored_timeout(tmp_path: Path,
                                                                            body: str):
    require_tool("bwrap")
    (tmp_path / "tests").mkdir()
    ids = ["tests/test_slow.py::test_slow"]
    test = f"import time\n\n\ndef test_slow():\n    {body}\n".encode()
    t0 = time.monotonic()
    run = run_pytest(tmp_path, {}, tests=ids, hidden={"tests/test_slow.py": test}, mutants=False,
                     timeout_s=10, test_timeout_s=1)
    assert run.failure == "tests_timed_out" and not run.starved, (run.failure, run.report_error)
    verdict = swebench_verdict(run, ids, [])
    assert verdict.status == "scored" and verdict.reward == 0.0
    assert time.monotonic() - t0 < 15
