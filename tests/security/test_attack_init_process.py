"""Attack: the sandbox's pid 1 (bubblewrap's init today, the trusted supervisor of the control
channel once there is one).

Running as the same uid as the agent and dumpable, pid 1 can be read (``/proc/1/mem``), attached
to with ptrace (see the seccomp suite), and its file descriptors, the control channel's among
them, reopened through ``/proc/1/fd``. None of that may be possible; signals to pid 1 must not
break the episode either.
"""

from __future__ import annotations

import pytest

from tests.security.conftest import bash, python_inside

pytestmark = pytest.mark.sandbox


def test_memory_of_pid_1_is_not_readable(rt):
    r = python_inside(rt, """
try:
    maps = [ln for ln in open('/proc/1/maps') if ln.split()[1].startswith('r')]
    start = int(maps[0].split('-')[0], 16)
    with open('/proc/1/mem', 'rb') as f:
        f.seek(start)
        print('READ', len(f.read(4096)))
except OSError as exc:
    print('DENIED', exc.errno)
""")
    assert "DENIED" in r.output or "READ" in r.output, r.output  # the probe ran
    assert "READ" not in r.output, f"the agent read pid 1's memory: {r.output}"


def test_descriptors_of_pid_1_cannot_be_reopened(rt):
    r = python_inside(rt, """
import os
opened = []
try:
    fds = os.listdir('/proc/1/fd')
except OSError as exc:
    fds = []
    print('LIST-DENIED', exc.errno)
for fd in fds:
    for mode in (os.O_RDONLY, os.O_WRONLY):
        try:
            os.close(os.open(f'/proc/1/fd/{fd}', mode | os.O_NONBLOCK))
            opened.append((fd, mode))
        except OSError:
            pass
print('FDS', fds, 'OPENED', opened)
""")
    assert "FDS" in r.output, r.output
    assert "OPENED []" in r.output, f"the agent reopened pid 1's descriptors: {r.output}"


@pytest.mark.parametrize("signal", ["STOP", "KILL", "TERM", "SEGV"])
def test_signals_to_pid_1_do_not_break_the_episode(rt, signal):
    bash(rt, f"kill -{signal} 1; kill -{signal} -1")
    r = bash(rt, "echo alive")
    if r.error_kind is not None and "restarted" in r.output:
        r = bash(rt, "echo alive")
    assert r.ok and "alive" in r.output, r
