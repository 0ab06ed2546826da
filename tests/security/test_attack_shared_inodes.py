"""Attack: any inode two concurrent sandboxes both reach is a channel (locks, inotify), so none may be shared.

File locks and inotify watches belong to an inode. A process may take a lock on any file it can
open, read-only included (``flock``, and POSIX or open-file-description read locks on an
``O_RDONLY`` descriptor), whoever owns it, and a process elsewhere reads it back (``F_GETLK``, or a
``flock`` that fails); an inotify watch on an inode it may read reports every open and read of that
inode, the neighbour's too. The red team's leak: the sandbox's ``/proc/sys``, ``/proc/irq`` and
``/proc/bus`` were binds of the host's procfs and the ``/proc`` masks binds of the host's
``/dev/null``, so code under test in a grading wrote each generated test file as byte-range locks
on ``/proc/sys/kernel/osrelease`` and a live episode of the same task read them (15 of 17
hidden-only literals).

So the test walks each sandbox's whole visible tree (everything but the processes' own
``/proc/<pid>`` directories and the private ``/tmp``; the workspace too, both sandboxes being
over one task snapshot, as an episode and a grading of a task are); one sandbox locks or touches
every path it finds, and the other, which walked its own tree, looks for the signal on every path
it found: a lock it can see, or an inotify event. Nothing may come across, and no file outside
``/tmp`` and the workspace (whose writes go to a copy of the sandbox's own) may be writable (a
file both can write, or map writable, carries anything). Without root a user cannot make device
nodes: the device nodes of ``/dev`` are the host's, a gap the threat model names ('The
downgrade'); the test pins it to exactly those nodes.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from proofgym.runtimes.sandbox import SandboxRuntime
from proofgym.tools import ToolResult
from tests.conftest import require_tool
from tests.security.conftest import NEIGHBOUR_LIMITS, python_inside
from tests.security.test_attack_neighbour_channels import (
    _HOLD,
    _LIBC,
    _holders,
    _wait_for_holder,
    graded_snap,  # noqa: F401 (a fixture)
    held,
    hold_and_probe,
    read_while_grading_holds,
)

pytestmark = pytest.mark.sandbox


@pytest.fixture
def two(tmp_path: Path) -> Iterator[tuple[SandboxRuntime, SandboxRuntime]]:
    """Two sandboxes running at once over one task snapshot (an episode and a grading of a task:
    the files neither has changed are the same files beneath their workspaces)."""
    require_tool("bwrap")
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("def f():\n    return 0\n")
    (tmp_path / "pkg" / "sub" / "data.txt").write_text("x" * 5000)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_pkg.py").write_text("import pkg\n")
    a = SandboxRuntime(tmp_path, limits=NEIGHBOUR_LIMITS)
    try:
        b = SandboxRuntime(tmp_path, limits=NEIGHBOUR_LIMITS)
    except BaseException:
        a.close()
        raise
    try:
        yield a, b
    finally:
        a.close()
        b.close()

#: Without root the sandbox's device nodes are bind mounts of the host's (an unprivileged user
#: cannot make device nodes; docs/threat-model.md, 'The downgrade'). Nothing else may be shared.
SHARED_WITHOUT_ROOT = frozenset(
    () if os.geteuid() == 0 else
    ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"))

#: Every path of the sandbox's tree but the private ones and the processes' own /proc entries
#: (per pid namespace already), without following symbolic links. Sorted, so both sides agree.
_WALK = f"ALLOWED = {sorted(SHARED_WITHOUT_ROOT)!r}\n" + """
import fcntl, json, stat, struct
PRIVATE = {"/tmp", "/proc/self", "/proc/thread-self"}
paths = []
stack = ["/"]
while stack:
    top = stack.pop()
    try:
        entries = list(os.scandir(top))
    except OSError:
        continue
    for entry in entries:
        path = entry.path.replace("//", "/")
        if path in PRIVATE or (top == "/proc" and entry.name.isdigit()):
            continue
        mode = os.lstat(path).st_mode
        if stat.S_ISLNK(mode) or stat.S_ISSOCK(mode):
            continue
        paths.append(path)
        if stat.S_ISDIR(mode):
            stack.append(path)
paths.sort()


def open_ro(path):
    try:
        return os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return None


#: the byte the holder read-locks (far past any file's end: no one else's range)
BYTE = 0x7FFF0000
def lock_struct(kind):
    return struct.pack("hhqqi4x", kind, 0, BYTE, 1, 0)
"""

#: Paths both sides must reach (open): where the shared inodes were and are most likely.
_KEY_PATHS = ("/proc/sys/kernel/osrelease", "/proc/sys/kernel", "/proc/irq", "/proc/bus",
              "/dev/null", "/dev/urandom", "/usr/bin/bash", "/etc/ld.so.cache",
              "/workspace/pkg/__init__.py", "/workspace/pkg/sub")

#: Hold a shared ``flock`` and an open-file-description read lock on every path it can open
#: (a descriptor each: the soft limit may be 1,024, the system tree alone holds thousands).
_LOCK_ALL = _WALK + f"KEY_PATHS = {_KEY_PATHS!r}\n" + """
import resource
resource.setrlimit(resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],) * 2)
fds, keys = [], []
for path in paths:
    fd = open_ro(path)
    if fd is None:
        continue
    fds.append(fd)
    keys += [path] if path in KEY_PATHS else []
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        pass
    try:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, lock_struct(fcntl.F_RDLCK))
    except OSError:
        pass
print("HOLDER", json.dumps(keys))
HELD = len(fds)
"""

#: Which paths show a lock (``F_OFD_GETLK`` finds one on the holder's byte, or an exclusive
#: ``flock`` is refused), and which files outside the private trees open for writing.
_PROBE_LOCKS = _WALK + f"KEY_PATHS = {_KEY_PATHS!r}\n" + """
locked, writable, opened, reached = {}, [], 0, []
for path in paths:
    fd = open_ro(path)
    if fd is None:
        continue
    opened += 1
    if path in KEY_PATHS:
        reached.append(path)
    kinds = []
    try:
        got = fcntl.fcntl(fd, fcntl.F_OFD_GETLK, lock_struct(fcntl.F_WRLCK))
        if struct.unpack("hhqqi4x", got)[0] != fcntl.F_UNLCK:
            kinds.append("fcntl")
    except OSError:
        pass
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
    except BlockingIOError:
        kinds.append("flock")
    except OSError:
        pass
    os.close(fd)
    if kinds:
        locked[path] = kinds
    if stat.S_ISREG(os.lstat(path).st_mode) and not path.startswith("/workspace/"):
        try:
            os.close(os.open(path, os.O_RDWR | os.O_NONBLOCK | os.O_NOCTTY))
            writable.append(path)
        except OSError:
            pass
locked = {p: k for p, k in sorted(locked.items()) if p not in ALLOWED}
print("PROBED", json.dumps({"paths": len(paths), "opened": opened, "reached": reached,
                            "n_locked": len(locked), "locked": dict(list(locked.items())[:40]),
                            "n_writable": len(writable), "writable": writable[:40]}))
"""

#: Watch every path (all events), count each watch's events in a thread until released.
_WATCH_ALL = _WALK + f"KEY_PATHS = {_KEY_PATHS!r}\n" + """
import threading
from collections.abc import Iterator
from pathlib import Path
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])  # before the reader thread starts
ino = libc.inotify_init1(0)
assert ino >= 0, err()
names = {}
for path in paths:
    wd = libc.inotify_add_watch(ino, path.encode(), 0xFFF)  # IN_ALL_EVENTS
    if wd >= 0:
        names.setdefault(wd, []).append(path)
events = {}


def read_events():
    while True:
        data = os.read(ino, 1 << 20)
        at = 0
        while at < len(data):
            wd, _mask, _cookie, size = struct.unpack_from("iIII", data, at)
            events[wd] = events.get(wd, 0) + 1
            at += 16 + size


threading.Thread(target=read_events, daemon=True).start()
print("WATCHER", json.dumps(sorted(p for ps in names.values() for p in ps if p in KEY_PATHS)))
HELD = len(names)
""" + _HOLD + """
import time
time.sleep(0.3)  # the reader drains what the toucher's last opens queued
seen = {p: n for wd, n in sorted(events.items()) for p in names[wd] if p not in ALLOWED}
print("EVENTS", json.dumps({"n": len(seen), "paths": dict(list(seen.items())[:40])}))
"""

#: Open and read a byte of every path (a directory: list it), twice.
_TOUCH_ALL = _WALK + """
touched = 0
for _ in range(2):
    for path in paths:
        fd = open_ro(path)
        if fd is None:
            continue
        try:
            if stat.S_ISDIR(os.fstat(fd).st_mode):
                os.listdir(fd)
            else:
                os.read(fd, 1)
        except OSError:
            pass
        os.close(fd)
        touched += 1
print("TOUCHED", touched)
"""


def _probed(result: ToolResult) -> dict:
    found = re.findall(r"^PROBED (.*)$", result.output, re.M)
    assert found, f"the probe did not run: {result}"
    return json.loads(found[0])


def test_no_lock_taken_in_one_sandbox_shows_in_another(two: tuple[SandboxRuntime, SandboxRuntime]):
    """The holder locks every path it can open; the prober, which must have opened a few
    thousand paths (the system, ``/proc/sys``, ``/dev``), sees none of those locks."""
    holder, prober = two
    out, probe = hold_and_probe(holder, _LOCK_ALL, prober, _PROBE_LOCKS)
    during = _probed(probe)
    assert held(out) > 1000 and during["opened"] > 1000, (out, during["opened"])
    assert re.findall(r"^HOLDER (.*)$", out, re.M) == [json.dumps(sorted(_KEY_PATHS))], out
    assert set(during["reached"]) == set(_KEY_PATHS), during["reached"]
    assert during["n_locked"] == 0, (
        f"locks taken in one sandbox show in its neighbour on {during['n_locked']} paths: "
        f"{during['locked']}")
    assert during["n_writable"] == 0, (
        f"{during['n_writable']} files outside /workspace and /tmp open for writing: "
        f"{during['writable']}")


def test_no_open_in_one_sandbox_shows_in_a_watch_next_door(two: tuple[SandboxRuntime, SandboxRuntime]):
    """The watcher puts an inotify watch on every path it can read; the toucher opens and reads
    every path of its own tree twice, and the host opens its ``/dev/null`` and procfs files; the
    watcher's watches see none of it (a mask of the host's ``/dev/null`` could not be opened,
    its mount being nodev, but could be watched)."""
    watcher, toucher = two
    comm = f"pg{secrets.token_hex(5)}"
    out: list[ToolResult] = []
    runner = threading.Thread(target=lambda: out.append(python_inside(
        watcher, _LIBC + _WATCH_ALL.replace("{comm}", comm).replace("{hold_s}", "60"))))
    runner.start()
    try:
        pid = _wait_for_holder(comm, runner, "the watcher")
        touched = python_inside(toucher, _LIBC + _TOUCH_ALL)
        for _ in range(2):  # and the host: its /dev/null was the masks' inode, its procfs /proc/sys's
            for path in ("/dev/null", "/proc/sys/kernel/osrelease", "/proc/irq", "/proc/bus"):
                os.close(os.open(path, os.O_RDONLY))
        os.kill(pid, signal.SIGUSR1)
    finally:
        runner.join(90)
    assert out and not _holders(comm), "the watcher did not finish"
    assert held(out[0].output) > 1000, out[0]
    assert re.findall(r"^WATCHER (.*)$", out[0].output, re.M) == [json.dumps(sorted(_KEY_PATHS))], out[0]
    assert int(re.findall(r"^TOUCHED (\d+)$", touched.output, re.M)[0]) > 2000, touched
    found = re.findall(r"^EVENTS (.*)$", out[0].output, re.M)
    assert found, out[0]
    seen = json.loads(found[0])
    assert seen["n"] == 0, (
        f"a sandbox's watches see its neighbour's opens on {seen['n']} paths: {seen['paths']}")


#: The red team's leak, as the code under test of a grading: 64 bits as one-byte read locks on a
#: file every sandbox could read, ``O_RDONLY``.
_OSRELEASE_WRITE = """
import fcntl, struct
fd = os.open("/proc/sys/kernel/osrelease", os.O_RDONLY)
for k in range(64):
    if ({value} >> k) & 1:
        fcntl.fcntl(fd, fcntl.F_SETLK, struct.pack("hhqqi4x", fcntl.F_RDLCK, 0, 4096 + k, 1, 0))
HELD = {value}
"""
_OSRELEASE_READ = """
import fcntl, struct
fd = os.open("/proc/sys/kernel/osrelease", os.O_RDONLY)
value = 0
for k in range(64):
    got = fcntl.fcntl(fd, fcntl.F_GETLK, struct.pack("hhqqi4x", fcntl.F_WRLCK, 0, 4096 + k, 1, 0))
    if struct.unpack("hhqqi4x", got)[0] != fcntl.F_UNLCK:
        value |= 1 << k
print("READ", value)
"""


def test_a_grading_cannot_signal_a_live_episode_through_proc_sys(graded_snap: Path):  # noqa: F811
    """The code under test of a grading writes 64 bits as read locks on
    ``/proc/sys/kernel/osrelease``; a live episode of the task reads them with ``F_GETLK``."""
    episode = SandboxRuntime(graded_snap, limits=NEIGHBOUR_LIMITS)
    try:
        value = secrets.randbits(64) | 1
        probe = read_while_grading_holds(graded_snap, episode, _OSRELEASE_WRITE.format(value=value),
                                         _OSRELEASE_READ)
    finally:
        episode.close()
    found = re.findall(r"^READ (\d+)$", probe.output, re.M)
    assert found, probe
    assert int(found[0]) == 0, (
        f"a live episode reads the locks a grading's code under test holds on /proc/sys: sent "
        f"{value}, read {found[0]}")
