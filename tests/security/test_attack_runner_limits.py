"""Attack: a test process changes, stops or kills the grading runner, its parent.

Test processes ran as the runner's uid, so each could ``prlimit``, renice, re-pin, re-schedule
and signal the runner. The runner put back the resource limits Python's ``resource`` module
names, and nothing else: a ``prlimit`` of ``RLIMIT_LOCKS`` (limit number 10, which the module
does not name) reached every later test of the grading, a channel between tests. Now each test
process runs under a seccomp filter that refuses, with ``EPERM``, every such call aimed at the
runner or the sandbox's init (by pid, by process group, by "all processes", by user, through a
pidfd, ``/proc/<pid>`` or a file's owner for ``SIGIO``); the runner still puts back every limit
*by number* (0 to the kernel's last) as a second line (checked here without the filter).

Each hidden test first looks for the mark an earlier test left, then tries to leave its own
on the runner; every attempt must be refused and no test may see a mark.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from proofgym.verify.sandboxed.program import run_pytest
from tests.conftest import REPO, require_tool

pytestmark = pytest.mark.sandbox

_libc = ctypes.CDLL(None, use_errno=True)


class _Rlimit(ctypes.Structure):
    _fields_ = [("cur", ctypes.c_uint64), ("max", ctypes.c_uint64)]


def _limit_count() -> int:
    """The kernel's number of resource limits (``RLIM_NLIMITS``): the first one it refuses."""
    old = _Rlimit()
    n = 0
    while _libc.prlimit(0, n, None, ctypes.byref(old)) == 0:
        n += 1
    return n


_ATTACKER = r'''
import ctypes, errno, fcntl, os, platform, signal, socket, struct

_libc = ctypes.CDLL(None, use_errno=True)
_INF = 2**64 - 1
_IOPRIO = {"x86_64": (251, 252), "aarch64": (30, 31)}[platform.machine()]
_NR = {"x86_64": {"tkill": 200, "tgkill": 234, "rt_sigqueueinfo": 129, "pidfd_open": 434,
                  "pidfd_send_signal": 424},
       "aarch64": {"tkill": 130, "tgkill": 131, "rt_sigqueueinfo": 138, "pidfd_open": 434,
                   "pidfd_send_signal": 424}}[platform.machine()]


class Rlimit(ctypes.Structure):
    _fields_ = [("cur", ctypes.c_uint64), ("max", ctypes.c_uint64)]


def limit(pid, n, new=None):
    old = Rlimit()
    ref = ctypes.byref(Rlimit(*new)) if new is not None else None
    if _libc.prlimit(pid, n, ref, ctypes.byref(old)) != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return old.cur, old.max


def mark(n, hard):
    """The soft value test processes leave on limit ``n``: one nothing else would set."""
    return 2**40 + n if hard == _INF else hard - 1


def marks_seen(count):
    found = []
    for n in range(count):
        soft, hard = limit(0, n)
        if hard > 1 and soft == mark(n, hard):
            found.append(f"limit {n} at {soft}")
    return found


def refused(call):
    """``None`` if ``call`` failed with EPERM; what happened otherwise."""
    try:
        result = call()
    except PermissionError:
        return None
    except OSError as exc:
        return f"failed otherwise: {exc}"
    return f"it worked ({result!r})"


def raw(name, *args):
    def call():
        if _libc.syscall(_NR[name], *args) < 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return call


def limit_attack(n, count):
    found = marks_seen(count)
    soft, hard = limit(0, n)
    if hard > 1:
        what = refused(lambda: limit(os.getppid(), n, (mark(n, hard), hard)))
        if what is not None:
            found.append(f"prlimit of the runner's limit {n}: {what}")
    return found


def ioprio(which, who):
    def call():
        if _libc.syscall(_IOPRIO[0], which, who, (3 << 13)) != 0:  # the idle class
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return call


def pidfd_signal(target):
    def call():
        fd = _libc.syscall(_NR["pidfd_open"], target, 0)
        if fd < 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
        raw("pidfd_send_signal", fd, signal.SIGSTOP, None, 0)()
    return call


def proc_dir_signal(target):
    def call():
        fd = os.open(f"/proc/{target}", os.O_RDONLY | os.O_DIRECTORY)
        raw("pidfd_send_signal", fd, signal.SIGSTOP, None, 0)()
    return call


def sigio(target):
    def call():
        r, w = os.pipe()
        fcntl.fcntl(r, 10, signal.SIGSTOP)  # F_SETSIG
        fcntl.fcntl(r, fcntl.F_SETOWN, target)
        fcntl.fcntl(r, fcntl.F_SETFL, os.O_ASYNC | os.O_NONBLOCK)
        os.write(w, b"x")
    return call


def own_cpu_count():
    """A task clock of this process (pid 0, any CPU): what the runner counts its tests with,
    and so could reset or stop; the grading sandbox allows it to the runner alone."""
    nr = {"x86_64": 298, "aarch64": 241}[platform.machine()]
    attr = ctypes.create_string_buffer(struct.pack("=IIQQQQQIIQ", 1, 64, 1, 0, 0, 0,
                                                   (1 << 1) | (1 << 5) | (1 << 6), 0, 0, 0))
    fd = _libc.syscall(nr, attr, ctypes.c_long(0), ctypes.c_long(-1), ctypes.c_long(-1),
                       ctypes.c_ulong(0))
    if fd < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return fd


def settings_attacks():
    ppid = os.getppid()
    cpus = sorted(os.sched_getaffinity(0))
    return {
        "renice": lambda: os.setpriority(os.PRIO_PROCESS, ppid, 7),
        "renice_group": lambda: os.setpriority(os.PRIO_PGRP, os.getpgid(ppid), 7),
        "renice_user": lambda: os.setpriority(os.PRIO_USER, 0, 7),
        "affinity": lambda: os.sched_setaffinity(ppid, {cpus[-1]}),
        "scheduler": lambda: os.sched_setscheduler(ppid, os.SCHED_IDLE, os.sched_param(0)),
        "sched_param": lambda: os.sched_setparam(ppid, os.sched_param(0)),
        "ioprio": ioprio(1, ppid),
        "ioprio_group": ioprio(2, os.getpgid(ppid)),
        "ioprio_user": ioprio(3, os.getuid()),
        "perf_counter": own_cpu_count,
    }


def signal_attacks():
    ppid = os.getppid()
    return {
        "kill_stop": lambda: os.kill(ppid, signal.SIGSTOP),
        "kill_kill": lambda: os.kill(ppid, signal.SIGKILL),
        "kill_all": lambda: os.kill(-1, signal.SIGSTOP),
        "kill_init": lambda: os.kill(1, signal.SIGKILL),
        "killpg_runner": lambda: os.killpg(os.getpgid(ppid), signal.SIGSTOP),
        "tkill": raw("tkill", ppid, signal.SIGSTOP),
        "tgkill": raw("tgkill", ppid, ppid, signal.SIGSTOP),
        "sigqueue": raw("rt_sigqueueinfo", ppid, signal.SIGSTOP, ctypes.create_string_buffer(128)),
        "pidfd": pidfd_signal(ppid),
        "proc_dir_pidfd": proc_dir_signal(ppid),
        "sigio_owner": sigio(ppid),
        "sigio_group": sigio(-os.getpgid(ppid)),
        # in the runner's group, "my group" (kill(0), PRIO_PGRP 0) would be the runner's too
        "join_runner_group": lambda: os.setpgid(0, os.getpgid(ppid)),
    }


def attack(kind, name):
    what = refused((settings_attacks() if kind == "settings" else signal_attacks())[name])
    if what is not None and kind == "signals":
        os.kill(os.getppid(), signal.SIGCONT)  # the run goes on, and says what happened
    return [] if what is None else [f"{name}: {what}"]
'''

_SETTINGS = ("renice", "renice_group", "renice_user", "affinity", "scheduler", "sched_param",
             "ioprio", "ioprio_group", "ioprio_user", "perf_counter")
_SIGNALS = ("kill_stop", "kill_kill", "kill_all", "kill_init", "killpg_runner", "tkill", "tgkill",
            "sigqueue", "pidfd", "proc_dir_pidfd", "sigio_owner", "sigio_group",
            "join_runner_group")


def _grade(tmp_path: Path, bodies: dict[str, str]) -> tuple[dict[str, str], object]:
    require_tool("bwrap")
    (tmp_path / "tests").mkdir()
    source = "from attacker import *\n" + "".join(
        f"\n\ndef test_{name}():\n    found = {body}\n    assert not found, 'FOUND ' + '; '.join(found)\n"
        for name, body in bodies.items())
    ids = [f"tests/test_a.py::test_{name}" for name in bodies]
    run = run_pytest(tmp_path, {"attacker.py": _ATTACKER.encode()}, tests=ids,
                     hidden={"tests/test_a.py": source.encode()}, mutants=False, timeout_s=60)
    return {i: "passed" for i in ids}, run


def test_no_test_process_changes_a_limit_or_setting_of_the_runner(tmp_path: Path):
    count = _limit_count()
    bodies = {f"limit_{n:02d}": f"limit_attack({n}, {count})" for n in range(count)}
    bodies.update({name: f"marks_seen({count}) + attack('settings', {name!r})"
                   for name in _SETTINGS})
    want, run = _grade(tmp_path, bodies)
    seen = {t: m[-300:] for t, m in run.messages.items() if "FOUND" in m}
    assert not seen, seen
    assert run.results == want and run.failure is None, (run.failure, run.report_error)


def test_no_test_process_can_signal_the_runner(tmp_path: Path):
    want, run = _grade(tmp_path, {name: f"attack('signals', {name!r})" for name in _SIGNALS})
    seen = {t: m[-300:] for t, m in run.messages.items() if "FOUND" in m}
    assert not seen, seen
    assert run.results == want and run.failure is None, (run.failure, run.report_error)


_SECOND_LINE = r"""
import ctypes, json, sys
from proofgym.programs import pytest_runner as runner

libc = ctypes.CDLL(None, use_errno=True)

class R(ctypes.Structure):
    _fields_ = [("cur", ctypes.c_uint64), ("max", ctypes.c_uint64)]

def get(n):
    r = R()
    assert libc.prlimit(0, n, None, ctypes.byref(r)) == 0
    return r.cur, r.max

def put(n, soft, hard):
    return libc.prlimit(0, n, ctypes.byref(R(soft, hard)), None) == 0

settings = runner._Settings()
out = {}
for n in range(int(sys.argv[1])):
    soft, hard = get(n)
    if hard > 1 and put(n, hard - 1 if hard != 2**64 - 1 else 2**40, hard):
        out[n] = [settings.restore(), get(n) == (soft, hard)]
for n in range(int(sys.argv[1])):  # a lowered hard limit cannot be raised back: named
    soft, hard = get(n)
    if hard > 1 and put(n, min(soft, hard - 1), hard - 1):
        name = runner._RLIMITS.get(n, f"resource limit {n}")
        out[f"hard {n}"] = [settings.restore(), get(n) == (soft, hard), name]
        break
print(json.dumps(out))
"""


def test_the_runner_puts_back_every_limit_by_number():
    """The second line, without the filter: the runner's own process, changed by number."""
    count = _limit_count()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", _SECOND_LINE, str(count)], capture_output=True,
                          text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    soft = {k: v for k, v in out.items() if not k.startswith("hard")}
    assert len(soft) >= count - 3, out  # only limits whose hard value is 0 or 1 are left out
    assert "10" in soft, out  # RLIMIT_LOCKS, which Python's resource module does not name
    assert all(v == [None, True] for v in soft.values()), out
    # a lowered hard limit is put back where the process may raise it (CAP_SYS_RESOURCE), and
    # named otherwise (the run stops as tampering)
    (changed, restored, name), = [v for k, v in out.items() if k.startswith("hard")]
    assert (changed is None and restored) or (not restored and name in changed), out


_SESSION_NICE = r"""
import os, subprocess, sys, time


def test_a():
    before = open("/proc/self/autogroup").read()
    for _ in range(20):  # the kernel takes one autogroup change per 100 ms, host-wide
        done = subprocess.run([sys.executable, "-c", "open('/proc/self/autogroup', 'w').write('19')"],
                              capture_output=True, text=True)
        if "nice 19" in open("/proc/self/autogroup").read():
            break
        time.sleep(0.1)
    assert "nice 19" in open("/proc/self/autogroup").read(), (before, done.stderr[-300:])


def test_b():
    assert "nice 19" not in open("/proc/self/autogroup").read(), "FOUND the session's nice value"
"""


def test_a_test_that_renices_the_runners_session_is_tampering(tmp_path: Path):
    """A program a test process runs owns its ``/proc/self/autogroup``, where the nice value of
    the session (so the runner's share of the CPU) is set; no filter sees a write to a file, so
    the runner notices it and stops the run as tampering before the next test."""
    require_tool("bwrap")
    if not Path("/proc/self/autogroup").exists():
        pytest.skip("this kernel has no autogroups (CONFIG_SCHED_AUTOGROUP): nothing to renice")
    (tmp_path / "tests").mkdir()
    ids = ["tests/test_s.py::test_a", "tests/test_s.py::test_b"]
    run = run_pytest(tmp_path, {}, tests=ids, hidden={"tests/test_s.py": _SESSION_NICE.encode()},
                     mutants=False, timeout_s=60)
    assert not any("FOUND" in m for m in run.messages.values()), run.messages
    assert run.failure == "tampering_detected", (run.results, run.messages)
    assert "session's nice value" in (run.report_error or ""), run.report_error


_PERF_PROBE = r"""
import ctypes, json, platform
libc = ctypes.CDLL(None, use_errno=True)
nr = {"x86_64": 298, "aarch64": 241}[platform.machine()]
out = {}
# a null attribute pointer: EFAULT where the filter lets the call through, EPERM where it refuses
for name, pid, cpu in (("self", 0, 2**64 - 1), ("init", 1, 2**64 - 1), ("a_cpu", 0, 0),
                       ("high_bits", 1 << 32, 2**64 - 1), ("cpu_low_bits", 0, 2**32 - 1)):
    ctypes.set_errno(0)
    libc.syscall(ctypes.c_long(nr), ctypes.c_ulong(0), ctypes.c_ulong(pid), ctypes.c_ulong(cpu),
                 ctypes.c_ulong(2**64 - 1), ctypes.c_ulong(0))
    out[name] = ctypes.get_errno()
print("RESULT " + json.dumps(out))
"""


@pytest.mark.parametrize("count_own_cpu", [True, False], ids=["grading", "agent"])
def test_only_a_grading_sandbox_may_count_its_own_cpu(count_own_cpu: bool):
    """The runner's count (``perf_event_open`` on itself, any CPU) is the one call of its kind a
    grading sandbox's filter lets through; an agent's sandbox refuses it like every other."""
    import errno

    from proofgym.runtimes.sandbox import SandboxHome
    from tests.sandbox_helpers import FAST_LIMITS

    require_tool("bwrap")
    home = SandboxHome(FAST_LIMITS)
    try:
        spawned = home.boot(None, [home.system.python, "-c", _PERF_PROBE],
                            count_own_cpu=count_own_cpu, stdin=subprocess.DEVNULL)
        out, _ = spawned.proc.communicate(timeout=60)
    finally:
        home.close()
    line = next(ln for ln in out.decode().splitlines() if ln.startswith("RESULT "))
    got = json.loads(line[len("RESULT "):])
    want_self = errno.EFAULT if count_own_cpu else errno.EPERM
    assert got == {"self": want_self, "init": errno.EPERM, "a_cpu": errno.EPERM,
                   "high_bits": errno.EPERM, "cpu_low_bits": errno.EPERM}, got
