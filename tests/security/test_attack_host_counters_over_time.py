"""Attack: a host-wide event counter read twice, with a neighbour's events in between.

``/proc/stat`` counts every process the host has forked since boot (``processes``). It is one
number for the host, every sandbox may read it, and every sandbox moves it: a reader that looks
before and after a window learns how many forks happened in it. The host's own churn is a few
dozen a second here; a neighbour (or a grading's code under test) forking 3000 times in the
window is a channel of several bits per window, whatever the sandbox's uid. The reader must not
tell a window with 3000 forks next door from one with none.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import threading

import pytest

from proofgym.runtimes.sandbox import SandboxRuntime
from proofgym.tools import ToolResult
from tests.security.conftest import python_inside
from tests.security.test_attack_neighbour_channels import _HOLD, _LIBC, _holders, _wait_for_holder

pytestmark = [pytest.mark.sandbox, pytest.mark.xfail(strict=True, reason=(
    "known gap, docs/threat-model.md ('Between concurrent episodes', Not defended): "
    "/proc/stat's counters (forks, context switches) and sysinfo(2) are host-wide and "
    "needed by common tools (os.cpu_count reads /proc/stat without /sys)"))]


_FORKS = """
def forks():
    try:
        for line in open("/proc/stat"):
            if line.startswith("processes "):
                return int(line.split()[1])
    except OSError:
        pass
    return None
"""

#: Read the counter, open the window (the host's cue), read it again once released.
_WINDOW = _FORKS + """
before = forks()
HELD = 1
""" + _HOLD + """
after = forks()
print("DELTA", "unreadable" if before is None or after is None else after - before)
"""

_FORK = ("for _ in range({n}):\n    child = os.fork()\n    if child == 0:\n        os._exit(0)\n"
         "    os.waitpid(child, 0)\nprint('FORKED')\n")




def _window(reader: SandboxRuntime, forker: SandboxRuntime, n: int) -> int | None:
    comm = f"pg{secrets.token_hex(5)}"
    out: list[ToolResult] = []
    runner = threading.Thread(target=lambda: out.append(python_inside(
        reader, _LIBC + _WINDOW.replace("{comm}", comm).replace("{hold_s}", "60"))))
    runner.start()
    try:
        pid = _wait_for_holder(comm, runner, "the reader")
        forked = python_inside(forker, _LIBC + _FORK.format(n=n))
        assert "FORKED" in forked.output, forked
        os.kill(pid, signal.SIGUSR1)
    finally:
        runner.join(60)
    assert out and not _holders(comm), "the reader did not finish"
    found = re.findall(r"^DELTA (-?\d+|unreadable)$", out[0].output, re.M)
    assert found, out[0]
    return None if found[0] == "unreadable" else int(found[0])


def test_forks_next_door_cannot_be_counted(two):
    reader, forker = two
    quiet, busy = _window(reader, forker, 0), _window(reader, forker, 3000)
    assert quiet is None or busy is None or busy - quiet < 1500, (
        f"a sandbox counts its neighbour's forks in /proc/stat: {quiet} in a window with none next "
        f"door, {busy} with 3000")
