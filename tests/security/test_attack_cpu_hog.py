"""Attack: a CPU hog next door scores a correct answer 0.

An agent runs busy loops (issue 20: 64; here 120, within the default process limit), each in
its own session (``setsid``: kernel autogroup gives every session its own share, so the loops
are equals of every other process on the host). A grading that runs meanwhile gets a sliver of
the CPU, runs past its time limit and, judged on wall time, scores the correct reference fix 0
("timed out"; issue 20: 0 in 33 s next to such a hog, 1.0 in 2 s alone). A grader that ran out
of time because the host was busy has not judged: the verdict must be the fix's 1.0, or an
error verdict (which resume re-grades), never a scored 0. Likewise a sandbox's hog must not
take more than that sandbox's share of the CPU from another.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import pytest

from proofgym import Artifact
from proofgym.core import Trace, grade
from proofgym.envs.code_repair import code_repair_tasks
from proofgym.runtimes.sandbox import SandboxLimits, SandboxRuntime
from tests.conftest import require_tool
from tests.security.conftest import bash, python_inside

# it loads the host on purpose: run alone, after the parallel part of the suite (.ci/run)
pytestmark = [pytest.mark.sandbox, pytest.mark.serial]

T = TypeVar("T")

#: The default process limit (128): the hog uses what any episode may.
_HOG_LIMITS = SandboxLimits(command_timeout_s=240.0, memory_mb=512)
_LOOPS = 120
#: The hog's loops, each its own session; then a process named by the test's token waits for the
#: host's SIGUSR1 (the shell exits, and the supervisor kills every loop).
_HOG = ("for i in $(seq {loops}); do setsid sh -c 'while :; do :; done' & done; "
        "python -c \"import ctypes, signal; signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1]); "
        "ctypes.CDLL(None).prctl(15, b'{comm}', 0, 0, 0); signal.sigtimedwait([signal.SIGUSR1], {hold_s})\"")


def _pids_named(comm: str) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if Path(f"/proc/{entry}/comm").read_text().strip() == comm:
                    pids.append(int(entry))
    return pids


def _busy_loop_pids() -> list[int]:
    """Host processes running the hog's loop (``sh -c 'while :; ...'`` in a session of its own)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if Path(f"/proc/{entry}/cmdline").read_bytes() == b"sh\0-c\0while :; do :; done\0":
                    pids.append(int(entry))
    return pids


def _busy_loops() -> int:
    return len(_busy_loop_pids())


def _cpu_cgroup(pid: int) -> str | None:
    """The process's cgroup in the hierarchy with the ``cpu`` controller (v1), or its v2 cgroup."""
    lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(","):
            return path
    return next((ln.split(":", 2)[2] for ln in lines if ln.startswith("0::")), None)


@pytest.fixture
def hog() -> Iterator[SandboxRuntime]:
    require_tool("bwrap")
    runtime = SandboxRuntime(limits=_HOG_LIMITS)
    try:
        yield runtime
    finally:
        runtime.close()


def while_hogging(hog: SandboxRuntime, work: Callable[[], T], hold_s: float = 200.0) -> T:
    """Run ``work()`` on the host while ``hog`` runs its busy loops; the loops are checked to
    be running both before and after ``work``."""
    comm = f"pg{secrets.token_hex(5)}"
    out: list = []
    runner = threading.Thread(target=lambda: out.append(bash(
        hog, _HOG.format(loops=_LOOPS, comm=comm, hold_s=hold_s))))
    runner.start()
    try:
        deadline = time.monotonic() + 60
        while not _pids_named(comm) and runner.is_alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _pids_named(comm), f"the hog did not start: {out}"
        assert _busy_loops() >= _LOOPS // 2, "the hog's loops are not running"
        result = work()
        assert len(_pids_named(comm)) == 1, "the hog stopped before the work ended"
    finally:
        for pid in _pids_named(comm):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGUSR1)
        runner.join(hold_s + 30)
    return result


def test_a_cpu_hog_next_door_never_scores_a_correct_fix_zero(hog):
    """The reference fix of a CodeRepair task, graded twice at once (a GRPO group of two) while a
    neighbour runs 120 ``setsid`` busy loops: each verdict is 1.0, or an error (host busy,
    re-graded on resume); never a scored 0."""
    task = code_repair_tasks()[0]

    def grade_fix():
        return grade(task, Trace([]), Artifact("sandbox", files=task.solution_files).view())

    alone = grade_fix()
    assert alone.status == "scored" and alone.reward == 1.0, alone  # the fix is right
    t0 = time.monotonic()
    with ThreadPoolExecutor(2) as pool:
        verdicts = while_hogging(hog, lambda: list(pool.map(lambda _: grade_fix(), range(2))))
    took = time.monotonic() - t0
    for verdict in verdicts:
        assert verdict.status == "error" or (verdict.status == "scored" and verdict.reward == 1.0), (
            f"a busy neighbour scored the correct fix of {task.id} {verdict.reward} (graded in "
            f"{took:.0f} s next to it, {alone.metrics.get('test_run_s', 0):.1f} s of tests alone): "
            f"{verdict.reason or verdict}")


_WORK = """
import time
t = time.perf_counter()
n = 0
for i in range(3_000_000):  # a fixed amount of CPU work, single-threaded (~0.3 s on one core)
    n += i * i
print("WALL", time.perf_counter() - t)
"""


def _wall(rt: SandboxRuntime) -> float:
    r = python_inside(rt, _WORK)
    found = re.findall(r"^WALL ([0-9.]+)$", r.output, re.M)
    assert found, r
    return float(found[0])


def test_a_cpu_hog_in_one_sandbox_takes_no_more_than_its_share(hog):
    """On 2 cores, a single-threaded job in one sandbox next to 120 busy loops in another should
    run at about its speed alone (the hog has its own share); without a CPU share per sandbox it
    gets about 2/121 of the machine and runs ~60 times slower. Allowed: 4 times slower."""
    require_tool("bwrap")
    limits = SandboxLimits(command_timeout_s=120.0, memory_mb=512, max_processes=32)
    worker = SandboxRuntime(limits=limits)
    try:
        alone = min(_wall(worker) for _ in range(3))
        hogged = while_hogging(hog, lambda: min(_wall(worker) for _ in range(2)))
    finally:
        worker.close()
    assert hogged < 4 * alone, (
        f"a neighbour's busy loops slowed a sandbox's fixed work from {alone:.2f} s to {hogged:.2f} s "
        f"({hogged / alone:.0f}x)")


@pytest.mark.skipif(os.geteuid() != 0, reason="a CPU cgroup per sandbox needs root (as a user: none)")
def test_no_process_of_a_sandbox_leaves_its_cpu_cgroup(hog):
    """Sessions, process groups and daemonized children all stay in the sandbox's CPU group, and
    the sandbox has no cgroup file system to move a process with (``cgroup.procs``)."""
    probe = bash(hog, "ls /sys/fs/cgroup 2>&1 | head -3; grep -c cgroup /proc/self/mountinfo; "
                      "cat /proc/self/cgroup")
    assert "No such file" in probe.output or not probe.output.split()[0].startswith("cpu"), probe
    assert probe.output.split("\n")[1].strip() == "0", f"a cgroup file system is mounted: {probe}"
    shell_groups = {ln.split(":", 2)[2] for ln in probe.output.splitlines()[2:] if ln.count(":") >= 2}
    assert shell_groups, probe

    def groups():
        loops = _busy_loop_pids()
        assert len(loops) >= _LOOPS // 2, loops
        return {_cpu_cgroup(pid) for pid in loops}

    seen = while_hogging(hog, groups)
    assert len(seen) == 1 and None not in seen and "/" not in seen, (
        f"the hog's setsid loops are in CPU groups {seen}, not one group of the sandbox's own")
