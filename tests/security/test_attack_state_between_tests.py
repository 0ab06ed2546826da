"""Attack: one test process leaves a per-process setting or an IPC object for the next one.

The tests of one grading run one after another, each in a process forked from the runner. Test
process A can change what the runner (its parent, same uid) will hand to the next fork, or leave
a kernel object behind, and test process B reads it:

* the runner's resource limits (``prlimit`` on the parent: a soft limit, or a hard one, which
  the runner cannot raise back), its nice value, CPU affinity and I/O priority
  (``setpriority``/``sched_setaffinity``/``ioprio_set`` on the parent);
* a POSIX message queue (``mq_open``; it lives in the sandbox's IPC namespace, not in a file
  system the runner restores);
* the descriptors a test process inherits: pytest's capture temporary file and the runner's
  output pipe (their mode, times and pipe size belong to the open file, shared by every fork).

Each hidden test looks for what an earlier one left, then leaves it. Mutants are off: each test
must pass (it found nothing). The runner's own settings are out of a test process's reach now
(its seccomp filter refuses the calls: ``test_attack_runner_limits.py``, which also checks the
second line, the runner putting back every limit by number and stopping the run as tampering
on what it cannot put back); a refused attempt leaves nothing, so its test passes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from proofgym.verify.sandboxed.program import run_pytest
from tests.conftest import require_tool

pytestmark = pytest.mark.sandbox

_NAMES = ("alpha", "bravo", "charlie", "delta")

_LEAVER = r'''
import contextlib, ctypes, fcntl, os, platform, resource

_libc = ctypes.CDLL(None, use_errno=True)
_librt = _libc  # glibc >= 2.34 has mq_open in libc itself
_librt.mq_open.restype = ctypes.c_int
_librt.mq_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p]
_IOPRIO = {"x86_64": (251, 252), "aarch64": (30, 31)}.get(platform.machine())
_MARK_NOFILE = 777
_MARK_TIMES = (1234567, 1234567)
_MARK_MODE = 0o604
_MARK_PIPE = 1 << 20


def rlimit_look_and_leave(hard):
    found = []
    soft_now, hard_now = resource.getrlimit(resource.RLIMIT_NOFILE)
    if _MARK_NOFILE in (soft_now, hard_now):
        found.append(f"nofile {soft_now}/{hard_now}")
    ppid = os.getppid()
    limit = (_MARK_NOFILE, _MARK_NOFILE if hard else hard_now)
    with contextlib.suppress(PermissionError):  # refused: the runner is out of reach
        resource.prlimit(ppid, resource.RLIMIT_NOFILE, limit)
    return found


def nice_look_and_leave():
    found = []
    if os.getpriority(os.PRIO_PROCESS, 0) == 17:  # (the host may run it reniced already)
        found.append(f"nice {os.getpriority(os.PRIO_PROCESS, 0)}")
    with contextlib.suppress(PermissionError):
        os.setpriority(os.PRIO_PROCESS, os.getppid(), 17)
    return found


def affinity_look_and_leave():
    found = []
    cpus = os.sched_getaffinity(0)
    if len(cpus) == 1 and os.cpu_count() > 1:
        found.append(f"affinity {sorted(cpus)}")
    with contextlib.suppress(PermissionError):
        os.sched_setaffinity(os.getppid(), {min(cpus)})
    return found


def ioprio_look_and_leave():
    found = []
    get, put = _IOPRIO[1], _IOPRIO[0]
    now = _libc.syscall(get, 1, 0)  # IOPRIO_WHO_PROCESS, this process
    if now == (2 << 13) | 7:  # best-effort class, level 7: the mark
        found.append(f"ioprio {now}")
    if _libc.syscall(put, 1, os.getppid(), (2 << 13) | 7) != 0 and ctypes.get_errno() != 1:
        found.append(f"ioprio_set failed: errno {ctypes.get_errno()}")
    return found


def mqueue_look_and_leave(mine):
    found = []
    for name in ("alpha", "bravo", "charlie", "delta"):
        fd = _librt.mq_open(f"/leak-{name}".encode(), os.O_RDONLY, 0, None)
        if fd >= 0:
            found.append(f"mqueue /leak-{name}")
    # O_CREAT: leave one for the next test (a refusal to create one is not a finding)
    _librt.mq_open(f"/leak-{mine}".encode(), os.O_RDWR | os.O_CREAT, 0o600, None)
    return found


def descriptors_look_and_leave():
    found = []
    fds = [int(name) for name in os.listdir("/proc/self/fd")]
    for fd in fds:  # look at all first: several descriptors may share one open file
        try:
            st = os.fstat(fd)
        except OSError:
            continue
        if st.st_mtime == _MARK_TIMES[1]:
            found.append(f"fd {fd} mtime")
        if st.st_mode & 0o7777 == _MARK_MODE:
            found.append(f"fd {fd} mode")
        try:
            if fcntl.fcntl(fd, 1032) == _MARK_PIPE:  # F_GETPIPE_SZ
                found.append(f"fd {fd} pipe size")
        except OSError:
            pass
    for fd in fds:
        try:
            os.utime(fd, _MARK_TIMES)
        except OSError:
            pass
        try:
            os.fchmod(fd, _MARK_MODE)
        except OSError:
            pass
        try:
            fcntl.fcntl(fd, 1031, _MARK_PIPE)  # F_SETPIPE_SZ
        except OSError:
            pass
    return found
'''

_CHANNELS = {
    "rlimit_soft": "rlimit_look_and_leave(False)",
    "rlimit_hard": "rlimit_look_and_leave(True)",
    "nice": "nice_look_and_leave()",
    "affinity": "affinity_look_and_leave()",
    "ioprio": "ioprio_look_and_leave()",
    "mqueue": "mqueue_look_and_leave({name!r})",
    "descriptors": "descriptors_look_and_leave()",
}


def _tests(call: str) -> bytes:
    return b"from leaver import *\n" + b"".join(
        f"\n\ndef test_{n}():\n    found = {call.format(name=n)}\n"
        f"    assert not found, 'FOUND ' + ';'.join(found)\n".encode() for n in _NAMES)


@pytest.mark.parametrize("channel", sorted(_CHANNELS))
def test_no_test_process_sees_what_the_one_before_left(tmp_path: Path, channel: str):
    require_tool("bwrap")
    (tmp_path / "tests").mkdir()
    ids = [f"tests/test_l.py::test_{n}" for n in _NAMES]
    run = run_pytest(tmp_path, {"leaver.py": _LEAVER.encode()}, tests=ids,
                     hidden={"tests/test_l.py": _tests(_CHANNELS[channel])}, mutants=False,
                     timeout_s=60)
    seen = {t: m for t, m in run.messages.items() if "FOUND" in m}
    assert not seen, seen
    assert run.results == {i: "passed" for i in ids}, (run.results, run.messages)
