"""Attack: one episode starves another that runs at the same time.

Parallel rollouts run several sandboxes at once, and a task is graded in a sandbox of its own.
Limits that the kernel counts per host user (``RLIMIT_NPROC`` counts every process of the uid,
inotify instances are per uid) are shared by every sandbox that runs as the same host uid: an
episode that holds them all makes the others' commands fail, and with them their rewards.
Each sandbox's limits must bind that sandbox alone.
"""

from __future__ import annotations

import threading
import time

import pytest

from proofgym.runtimes.sandbox import SandboxRuntime
from tests.conftest import require_tool
from tests.sandbox_helpers import FAST_LIMITS
from tests.security.conftest import bash

pytestmark = pytest.mark.sandbox


@pytest.fixture
def two():
    require_tool("bwrap")
    a, b = SandboxRuntime(limits=FAST_LIMITS), SandboxRuntime(limits=FAST_LIMITS)
    try:
        yield a, b
    finally:
        a.close()
        b.close()


def test_processes_of_one_episode_do_not_starve_another(two):
    hog, victim = two
    assert bash(victim, "true").ok and bash(hog, "true").ok  # both booted
    n = FAST_LIMITS.max_processes - 12  # within the hog's own process limit
    out: list = []
    runner = threading.Thread(target=lambda: out.append(bash(
        hog, f"for i in $(seq {n}); do sleep 2.5 & done; sleep 2; echo held")))
    runner.start()
    try:
        time.sleep(1.0)
        r = bash(victim, "for i in 1 2 3 4 5 6 7 8; do /usr/bin/true || echo FORK-FAILED; done; "
                         "python -c 'import subprocess; subprocess.run([\"true\"], check=True)' "
                         "&& echo done")
    finally:
        runner.join()
    assert "held" in out[0].output, f"the hog did not hold its processes: {out[0]}"
    assert "done" in r.output and "FORK-FAILED" not in r.output, (
        f"another episode's processes made this one's commands fail: {r}")


def test_inotify_instances_of_one_episode_do_not_starve_another(two):
    hog, victim = two
    probe = ("import ctypes; libc = ctypes.CDLL(None, use_errno=True); fd = libc.inotify_init1(0); "
             "print('INOTIFY', fd, ctypes.get_errno())")
    out: list = []
    runner = threading.Thread(target=lambda: out.append(bash(
        hog, "python -c \"import ctypes, time\nlibc = ctypes.CDLL(None, use_errno=True)\n"
             "fds = [libc.inotify_init1(0) for _ in range(1000)]\n"
             "print('HELD', sum(f >= 0 for f in fds))\ntime.sleep(2)\"")))
    runner.start()
    try:
        time.sleep(1.0)
        r = bash(victim, f"python -c \"{probe}\"")
    finally:
        runner.join()
    assert "HELD" in out[0].output, out[0]
    fields = r.output.split()
    assert "INOTIFY" in fields and int(fields[fields.index("INOTIFY") + 1]) >= 0, (
        f"another episode used up this one's inotify instances: {r} (hog: {out[0].output})")
