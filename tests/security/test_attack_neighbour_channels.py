"""Attack: a covert channel (and starvation) between concurrent sandboxes through per-uid counters.

The kernel counts some resources per host user: inotify instances and watches, epoll watches,
POSIX message queue bytes (``RLIMIT_MSGQUEUE``), queued signals (``RLIMIT_SIGPENDING``) and pipe
buffer pages (``fs.pipe-user-pages-soft``). When every sandbox runs as one host uid, a sandbox
that holds N of them leaves the others N fewer: the others fail (starvation), and a sandbox that
counts what it can still get reads N (a channel). A grading sandbox whose code under test
modulates such a count signals the hidden tests to a live agent episode of the same task
(issue 20: 4 hidden test bodies per grading, 1.0 on 7 of 7 episodes).

Every test here holds a counter in one sandbox ("the hog") and probes it from another, while the
hog provably still holds it: the hog names its process with a fresh token once it holds the
counter and waits for the host's ``SIGUSR1``; the host finds that process in ``/proc``, runs the
probe, checks the hog is still holding, then releases it. What must hold: the probe in the other
sandbox succeeds, and what it counts does not depend on what the hog holds.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import signal
import threading
import time
from pathlib import Path

import pytest

from proofgym.runtimes.sandbox import SandboxLimits, SandboxRuntime, ids
from proofgym.tools import ToolResult
from proofgym.verify.sandboxed.program import run_pytest
from tests.conftest import require_tool
from tests.security.conftest import NEIGHBOUR_LIMITS, python_inside

# it loads the host on purpose: run alone, after the parallel part of the suite (.ci/run)
pytestmark = [pytest.mark.sandbox, pytest.mark.serial]

#: Without root every sandbox is the user's uid: proofgym gives each its slot's share of what it
#: can split (inotify, queue bytes, queued signals), so a hog holds at most that share.
UNPRIVILEGED = os.geteuid() != 0
#: The counters that cannot be split without a uid per sandbox (docs/threat-model.md).
shared_without_root = pytest.mark.xfail(
    UNPRIVILEGED, strict=True,
    reason="known gap without root (docs/threat-model.md, 'The downgrade'): this pool is counted "
           "per host uid with no user-namespace level to split it; as root each sandbox has its own uid")


def _share(name: str, otherwise: int) -> int:
    """What one sandbox can hold of ``name`` without root (its slot's share), else ``otherwise``."""
    return min(otherwise, ids.user_namespace_caps()[name]) if UNPRIVILEGED else otherwise

#: Room for the hog to fill a counter (the epoll pool takes ~5 s alone, more on a busy host).
_LIMITS = NEIGHBOUR_LIMITS
#: epoll watches are kernel memory charged to the sandbox's memory cgroup (~200 bytes each):
#: the hog needs ~1.1 GiB for the 5.49 M watches of ``fs.epoll.max_user_watches`` here.
_EPOLL_LIMITS = SandboxLimits(command_timeout_s=90.0, memory_mb=1600, max_processes=64,
                              max_output_bytes=256 * 1024, max_output_chars=8192, max_file_size_mb=16)

#: Appended to every hog: report what it holds, name the process (the host's "holding" signal),
#: wait for the host's release, bounded so a lost release cannot hang the test.
_HOLD = """
import ctypes as _c, signal as _s
_s.pthread_sigmask(_s.SIG_BLOCK, [_s.SIGUSR1])
print("HELD", HELD, flush=True)
_c.CDLL(None).prctl(15, b"{comm}", 0, 0, 0)  # PR_SET_NAME
print("RELEASED" if _s.sigtimedwait([_s.SIGUSR1], {hold_s}) else "NOT-RELEASED", flush=True)
"""

_LIBC = """
import ctypes, errno, os, signal
libc = ctypes.CDLL(None, use_errno=True)
def err():
    return errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
"""


def _holders(comm: str) -> list[int]:
    """Host pids whose process name is ``comm``."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if Path(f"/proc/{entry}/comm").read_text().strip() == comm:
                    pids.append(int(entry))
            except OSError:
                continue
    return pids


def _wait_for_holder(comm: str, still_running: threading.Thread, what: str,
                     timeout_s: float = 120.0) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pids = _holders(comm)
        if pids:
            return pids[0]
        if not still_running.is_alive():
            break
        time.sleep(0.05)
    raise AssertionError(f"{what} never reported holding the counter (process {comm!r} not seen)")


def hold_and_probe(hog: SandboxRuntime, hog_source: str, victim: SandboxRuntime,
                   probe_source: str, hold_s: float = 60.0) -> tuple[str, ToolResult]:
    """Run ``hog_source`` (which sets ``HELD``) in ``hog``; while it holds, run ``probe_source``
    in ``victim``. Returns the hog's output and the probe's result; fails unless the hog was
    still holding when the probe ended."""
    comm = f"pg{secrets.token_hex(5)}"
    out: list[ToolResult] = []
    runner = threading.Thread(target=lambda: out.append(python_inside(
        hog, _LIBC + hog_source + _HOLD.format(comm=comm, hold_s=hold_s))))
    runner.start()
    try:
        pid = _wait_for_holder(comm, runner, "the hog sandbox")
        probe = python_inside(victim, _LIBC + probe_source)
        assert _holders(comm) == [pid], "the hog stopped holding before the probe ended"
        os.kill(pid, signal.SIGUSR1)
    finally:
        runner.join(hold_s + 30)
    assert out, "the hog's command never returned"
    assert "RELEASED" in out[0].output.split(), f"the hog did not hold until released: {out[0]}"
    return out[0].output, probe


def held(output: str) -> int:
    found = re.findall(r"^HELD (\d+)$", output, re.M)
    assert found, f"the hog reported nothing held: {output}"
    return int(found[-1])


@pytest.fixture
def pair(two: tuple[SandboxRuntime, SandboxRuntime]) -> tuple[SandboxRuntime, SandboxRuntime]:
    """A hog and its victim (the suite's ``two`` concurrent sandboxes)."""
    return two


# --------------------------------------------------------------------------------- inotify
_INOTIFY_HOLD = """
fds = []
while len(fds) < {n}:
    fd = libc.inotify_init1(0)
    if fd < 0:
        break
    fds.append(fd)
HELD = len(fds)
"""

#: How many inotify instances this sandbox can still create (the receiver's decoder).
_INOTIFY_COUNT = """
fds = []
while len(fds) < 1000:
    fd = libc.inotify_init1(0)
    if fd < 0:
        break
    fds.append(fd)
print("COUNT", len(fds), err())
"""


def _count(result: ToolResult) -> int:
    found = re.findall(r"^COUNT (\d+)", result.output, re.M)
    assert found, f"the probe did not count: {result}"
    return int(found[-1])


def test_inotify_instances_held_next_door_cannot_be_counted(pair):
    """The channel of issue 20: A holds N instances, B counts how many it can create. Two
    different N must give B the same count (here, 128 - N - baseline when the uid is shared)."""
    hog, victim = pair
    counts = {}
    for n in (8, 72):
        hog_out, probe = hold_and_probe(hog, _INOTIFY_HOLD.format(n=n), victim, _INOTIFY_COUNT)
        want = _share("max_inotify_instances", n)  # without root: all its share, and no more
        assert held(hog_out) == want, f"the hog could not hold {want} instances: {hog_out}"
        counts[n] = _count(probe)
    assert counts[8] > 0 and counts[8] == counts[72], (
        f"a sandbox decodes what its neighbour holds: it could create {counts[8]} inotify instances "
        f"next to 8 held, {counts[72]} next to 72 held")


@pytest.fixture
def graded_snap(tmp_path: Path) -> Path:
    """A task whose one test imports ``m``: the code under test runs at import."""
    require_tool("bwrap")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_m.py").write_text(
        "import m\n\n\ndef test_f():\n    assert m.f() == 1\n")
    (tmp_path / "m.py").write_text("def f():\n    return 0\n")
    return tmp_path


def read_while_grading_holds(snap: Path, episode: SandboxRuntime, hold_source: str,
                             read_source: str) -> ToolResult:
    """Grade ``m.py`` = ``hold_source`` (it holds something at import, names its process and
    waits for release); while it holds, run ``read_source`` in the live ``episode``."""
    comm = f"pg{secrets.token_hex(5)}"
    module = _LIBC + hold_source + _HOLD.format(comm=comm, hold_s=30) + "\ndef f():\n    return 1\n"
    graded: list = []
    grading = threading.Thread(target=lambda: graded.append(run_pytest(
        snap, {"m.py": module.encode()}, tests=["tests/test_m.py"], timeout_s=90,
        test_timeout_s=60)))
    grading.start()
    try:
        pid = _wait_for_holder(comm, grading, "the code under test")
        probe = python_inside(episode, _LIBC + read_source)
        still = _holders(comm) == [pid]
    finally:
        # release every test process of the grading that holds (each imports m)
        while grading.is_alive():
            for p in _holders(comm):
                with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                    os.kill(p, signal.SIGUSR1)
            grading.join(0.1)
    assert still, "the code under test stopped holding before the episode read"
    assert graded and graded[0].report_error is None, graded
    return probe


def test_a_grading_sandbox_cannot_signal_a_live_episode_through_inotify(graded_snap: Path):
    """The critical leak of issue 20: code under test, running in a grading sandbox, holds N
    inotify instances while a live agent episode counts its own. The episode's count must not
    depend on N, or hidden tests stream to the agent."""
    episode = SandboxRuntime(limits=_LIMITS)
    try:
        counts = {n: _count(read_while_grading_holds(graded_snap, episode, _INOTIFY_HOLD.format(n=n),
                                                     _INOTIFY_COUNT)) for n in (8, 72)}
    finally:
        episode.close()
    assert counts[8] > 0 and counts[8] == counts[72], (
        f"a live episode decodes what the code under test of a grading sends: it could create "
        f"{counts[8]} inotify instances while the grading held 8, {counts[72]} while it held 72")


_INOTIFY_WATCHES_HOLD = """
os.makedirs("/tmp/w", exist_ok=True)
names = [f"/tmp/w/{i}".encode() for i in range(13000)]
for name in names:
    open(name, "w").close()
HELD = 0
full = False
for _ in range(16):  # few instances (the victim needs one), one watch per (instance, file)
    ino = libc.inotify_init1(0)
    for name in names:
        if libc.inotify_add_watch(ino, name, 2) < 0:
            full = True
            break
        HELD += 1
    if full:
        break
print("STOPPED", err() if full else "cap")
"""

_INOTIFY_WATCH_PROBE = """
ino = libc.inotify_init1(0)
ok = ino >= 0 and libc.inotify_add_watch(ino, b"/tmp", 2) >= 0
print("PROBE", "ok" if ok else "failed " + err())
"""


def test_inotify_watches_held_next_door_do_not_starve_a_sandbox(pair):
    hog, victim = pair
    hog_out, probe = hold_and_probe(hog, _INOTIFY_WATCHES_HOLD, victim, _INOTIFY_WATCH_PROBE)
    want = _share("max_inotify_watches", 100_001) - 1  # without root: up to its share
    assert held(hog_out) >= want, f"the hog did not hold many inotify watches: {hog_out}"
    assert "PROBE ok" in probe.output, (
        f"a neighbour holding {held(hog_out)} inotify watches made inotify_add_watch fail here: {probe}")


# ----------------------------------------------------------------------------------- epoll
_EPOLL_HOLD = """
import resource, select
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # the sandbox may raise its own soft limit
k = min(2400, (hard - 64) // 2)
fds = [os.eventfd(0) for _ in range(k)]
eps, HELD, stop = [], 0, "cap"
try:
    while HELD < 6_000_000 and len(eps) < k:  # fds x epoll instances watches, past the pool
        ep = select.epoll()
        eps.append(ep)
        for fd in fds:
            ep.register(fd, select.EPOLLIN)
            HELD += 1
except OSError as exc:
    stop = errno.errorcode.get(exc.errno, str(exc.errno))
print("STOPPED", stop, "fds", k)
"""

_EPOLL_PROBE = """
import select
ep = select.epoll()
done, failure = 0, ""
try:
    for _ in range(256):  # what an ordinary program needs (an event loop, a few selectors)
        ep.register(os.eventfd(0), select.EPOLLIN)
        done += 1
except OSError as exc:
    failure = " " + errno.errorcode.get(exc.errno, str(exc.errno))
print("PROBE", "ok" if done == 256 else f"failed after {done}{failure}")
"""


@shared_without_root
def test_epoll_watches_held_next_door_do_not_starve_a_sandbox():
    """A sandbox fills the epoll watch pool (``fs.epoll.max_user_watches``, per uid): another
    sandbox's ``epoll_ctl`` must still succeed (two default sandboxes exhausted it, issue 20)."""
    require_tool("bwrap")
    hog, victim = SandboxRuntime(limits=_EPOLL_LIMITS), SandboxRuntime(limits=_LIMITS)
    try:
        t0 = time.monotonic()
        hog_out, probe = hold_and_probe(hog, _EPOLL_HOLD, victim, _EPOLL_PROBE, hold_s=30)
    finally:
        hog.close()
        victim.close()
    pool = int(Path("/proc/sys/fs/epoll/max_user_watches").read_text())
    assert held(hog_out) >= min(pool, 6_000_000) // 2, (
        f"the hog held too few epoll watches to test anything ({held(hog_out)} of {pool}): {hog_out}")
    assert time.monotonic() - t0 < 150
    assert "PROBE ok" in probe.output, (
        f"a neighbour holding {held(hog_out)} epoll watches made epoll_ctl fail here: {probe}")


# ---------------------------------------------------------- other per-uid counters
_MQUEUE_SETUP = f"""
MAXMSG = {2 if os.geteuid() != 0 else 10}
class Attr(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_long), ("maxmsg", ctypes.c_long), ("msgsize", ctypes.c_long),
                ("curmsgs", ctypes.c_long), ("pad", ctypes.c_long * 4)]
libc.mq_open.restype = ctypes.c_int
libc.mq_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.POINTER(Attr)]
def mq_open(i):
    # 80 KiB of the uid's RLIMIT_MSGQUEUE (800 KiB) per queue; without root a sandbox's share
    # of it is 800 KiB / the user's sandbox slots, so smaller queues
    attr = Attr(0, MAXMSG, 8192 if MAXMSG == 10 else 512, 0)
    return libc.mq_open(f"/pg{{os.getpid()}}-{{i}}".encode(), os.O_CREAT | os.O_RDWR, 0o600,
                        ctypes.byref(attr))
"""

_MQUEUE_HOLD = _MQUEUE_SETUP + """
queues = []
while len(queues) < 256 and (q := mq_open(len(queues))) >= 0:
    queues.append(q)
print("STOPPED", err())
HELD = len(queues)
"""

_MQUEUE_PROBE = _MQUEUE_SETUP + """
q = mq_open(0)
ok = q >= 0 and libc.mq_send(q, b"hello", 5, 0) == 0
print("PROBE", "ok" if ok else "failed " + err())
"""

_SIGQUEUE = """
class SigVal(ctypes.Union):
    _fields_ = [("i", ctypes.c_int), ("p", ctypes.c_void_p)]
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN])
def sigqueue():  # queued, not delivered: counts against the uid's RLIMIT_SIGPENDING
    return libc.sigqueue(os.getpid(), int(signal.SIGRTMIN), SigVal(1)) == 0
"""

_SIGPENDING_HOLD = _SIGQUEUE + """
HELD = 0
while HELD < 1_000_000 and sigqueue():
    HELD += 1
print("STOPPED", err())
"""

_SIGPENDING_PROBE = _SIGQUEUE + """
print("PROBE", "ok" if sigqueue() else "failed " + err())
"""

_PIPES_HOLD = """
import fcntl
F_SETPIPE_SZ, F_GETPIPE_SZ = 1031, 1032
pipes, HELD = [], 0
while len(pipes) < 200:  # grow pipes to 1 MiB until the uid's soft limit of pages refuses
    r, w = os.pipe()
    pipes.append((r, w))
    try:
        fcntl.fcntl(w, F_SETPIPE_SZ, 1 << 20)
    except OSError as exc:
        print("STOPPED", errno.errorcode.get(exc.errno))
        break
    HELD += (1 << 20) // 4096
while len(pipes) < 400:  # then past it: once over, the kernel gives new pipes 2 pages, not 16
    r, w = os.pipe()
    pipes.append((r, w))
    if fcntl.fcntl(w, F_GETPIPE_SZ) < 65536:
        break
    HELD += 16
"""

_PIPES_PROBE = """
import fcntl
r, w = os.pipe()
size = fcntl.fcntl(w, 1032)  # F_GETPIPE_SZ: a new pipe holds 64 KiB
print("PROBE", "ok" if size == 65536 else f"failed: a new pipe holds {size} bytes")
"""

COUNTERS = {
    "mqueue_bytes": (_MQUEUE_HOLD, _MQUEUE_PROBE, 5),
    # without root: the sandbox's share of the user's RLIMIT_SIGPENDING
    "pending_signals": (_SIGPENDING_HOLD, _SIGPENDING_PROBE, 50_000 if not UNPRIVILEGED else 1_000),
    "pipe_buffer_pages": (_PIPES_HOLD, _PIPES_PROBE, 8_000),
}


@pytest.mark.parametrize("counter", [
    "mqueue_bytes", "pending_signals",
    pytest.param("pipe_buffer_pages", marks=shared_without_root)])
def test_a_per_uid_counter_held_next_door_does_not_starve_a_sandbox(pair, counter):
    """``RLIMIT_MSGQUEUE`` (queue bytes), ``RLIMIT_SIGPENDING`` (queued signals) and the pipe
    buffer pages of ``fs.pipe-user-pages-soft`` are counted per host uid: a neighbour that holds
    them all must not make this sandbox's ``mq_open``, ``sigqueue`` fail or its pipes shrink."""
    hog_source, probe_source, at_least = COUNTERS[counter]
    hog, victim = pair
    hog_out, probe = hold_and_probe(hog, hog_source, victim, probe_source)
    assert held(hog_out) >= at_least, f"the hog did not hold its {counter}: {hog_out}"
    assert "PROBE ok" in probe.output, (
        f"a neighbour holding {held(hog_out)} of {counter} starved this sandbox: {probe.output}")


# ------------------------------------------------------------- host-wide counters
_FILES_HOLD = """
import resource
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # the sandbox may raise its own soft limit
fds = [os.eventfd(0) for _ in range(min(5000, hard - 64))]
HELD = 5000 if len(fds) == 5000 else len(fds)
"""

_INODES_HOLD = """
os.makedirs("/tmp/inodes", exist_ok=True)
for i in range(50000):  # empty files in the sandbox's own /tmp
    os.close(os.open(f"/tmp/inodes/{i}", os.O_CREAT | os.O_WRONLY, 0o600))
HELD = 50000
"""

#: A number the kernel keeps for the whole host, as a reader inside sees it: the first field of
#: ``path``, or the number after ``key`` on its line.
_HOST_READ = """
try:
    text = open({path!r}).read()
    key = {key!r}
    if key:
        text = next(line for line in text.splitlines() if line.startswith(key))[len(key):]
    print("FILES", text.split()[0])
except (OSError, IndexError, StopIteration) as exc:
    print("FILES unreadable", type(exc).__name__)
"""
_FILES_READ = _HOST_READ.format(path="/proc/sys/fs/file-nr", key="")

#: counter -> (what the reader reads, the hog's source, how much it moves it, what the host's own
#: churn between two reads stays under here)
_SHMEM_HOLD = """
for i in range(13):  # the sandbox's /tmp is a tmpfs: its pages are shared memory (13 x 15 MiB,
    with open(f"/tmp/shm{i}", "wb") as f:  # within the file size limit and /tmp's 256 MiB)
        for _ in range(15):
            f.write(b"x" * (1 << 20))
HELD = 195 << 10
"""

HOST_COUNTERS = {
    "open_files": ("/proc/sys/fs/file-nr", "", _FILES_HOLD, 5000, 2500),
    "inodes": ("/proc/sys/fs/inode-nr", "", _INODES_HOLD, 50000, 25000),
    "shared_memory_kb": ("/proc/meminfo", "Shmem:", _SHMEM_HOLD, 195 << 10, 100 << 10),
}


def _files(result: ToolResult) -> int | None:
    found = re.findall(r"^FILES (\d+)$", result.output, re.M)
    assert found or "FILES unreadable" in result.output, result
    return int(found[0]) if found else None


@pytest.mark.parametrize("counter", [
    "inodes", "open_files",
    pytest.param("shared_memory_kb", marks=pytest.mark.xfail(strict=True, reason=(
        "known gap, docs/threat-model.md ('host-wide counters'): /proc/meminfo (and sysinfo(2)) "
        "show the host's shared memory, which a neighbour's tmpfs pages move")))])
def test_host_wide_counts_held_next_door_cannot_be_read(pair, counter: str):
    """A uid per sandbox does not split what the kernel counts for the whole host: the open file
    handles of ``/proc/sys/fs/file-nr``, the inodes of ``/proc/sys/fs/inode-nr`` and the shared
    memory of ``/proc/meminfo`` are numbers
    every sandbox can read, and any sandbox can move them by thousands (issue 20's channel, uid
    or not). Reads next to nothing held and next to the hog's must not tell them apart."""
    path, key, hold, n, churn = HOST_COUNTERS[counter]
    hog, victim = pair
    seen = {}
    for amount, source in ((0, "HELD = 0\n"), (n, hold)):
        hog_out, probe = hold_and_probe(hog, source, victim, _HOST_READ.format(path=path, key=key))
        assert held(hog_out) == amount, hog_out
        seen[amount] = _files(probe)
    assert seen[0] is None or seen[n] is None or abs(seen[n] - seen[0]) < churn, (
        f"a sandbox reads {path} and sees what its neighbour holds: {seen[0]} next to 0 held, "
        f"{seen[n]} next to {n} held")


_WORKSPACE_FILES_HOLD = """
os.makedirs("/workspace/many", exist_ok=True)
for i in range(20000):  # empty files in the sandbox's own workspace
    os.close(os.open(f"/workspace/many/{i}", os.O_CREAT | os.O_WRONLY, 0o600))
HELD = 20000
"""

_FREE_INODES_READ = 'st = os.statvfs("/workspace")\nprint("FILES", st.f_ffree)\n'


@pytest.mark.xfail(UNPRIVILEGED, strict=True, reason=(
    "known gap without root, docs/threat-model.md ('The downgrade'): without root the workspace "
    "changes live on the host's disk (no tmpfs per runtime), whose free inodes every sandbox reads"))
def test_free_inodes_of_the_workspace_file_system_do_not_show_a_neighbours_files(pair):
    """The workspace's file system, as ``statvfs`` reports it: as root each runtime's changes live
    on a tmpfs of its own; without root they live on the host's disk, whose free inodes every
    sandbox reads and every sandbox moves (20,000 files: 20,000 fewer)."""
    hog, victim = pair
    seen = {}
    for amount, source in ((0, "HELD = 0\n"), (20000, _WORKSPACE_FILES_HOLD)):
        hog_out, probe = hold_and_probe(hog, source, victim, _FREE_INODES_READ)
        assert held(hog_out) == amount, hog_out
        seen[amount] = _files(probe)
    assert seen[0] is None or seen[20000] is None or abs(seen[20000] - seen[0]) < 10000, (
        f"a sandbox reads the free inodes of its workspace's file system and sees its neighbour's "
        f"files: {seen[0]} next to 0 files, {seen[20000]} next to 20000")


def test_a_grading_sandbox_cannot_signal_a_live_episode_through_the_open_file_count(graded_snap: Path):
    """Issue 20's attack with the host-wide counter: the code under test holds 0 or 5000
    descriptors, the live episode reads ``/proc/sys/fs/file-nr``."""
    episode = SandboxRuntime(limits=_LIMITS)
    try:
        seen = {n: _files(read_while_grading_holds(graded_snap, episode, source, _FILES_READ))
                for n, source in ((0, "HELD = 0\n"), (5000, _FILES_HOLD))}
    finally:
        episode.close()
    assert seen[0] is None or seen[5000] is None or abs(seen[5000] - seen[0]) < 2500, (
        f"a live episode reads what the code under test of a grading sends through the host's "
        f"open file count: {seen[0]} while it held 0, {seen[5000]} while it held 5000")


def test_the_per_uid_key_counts_are_not_readable(rt):
    """``/proc/key-users`` lists every uid's key count and bytes (``keyctl`` itself is denied
    by seccomp, so the count cannot be modulated from inside; reading it would still show the
    host's users and their key use)."""
    r = python_inside(rt, "try:\n    print('KEYUSERS', open('/proc/key-users').read())\n"
                          "except OSError as exc:\n    print('UNREADABLE', exc)\n")
    assert "UNREADABLE" in r.output or r.output.split() == ["KEYUSERS"], r
