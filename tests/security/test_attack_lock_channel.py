"""Attack: file locks (and inotify watches) on an inode every sandbox shares, channels no uid separates.

A lock belongs to an inode, and some inodes are the same in every sandbox: bubblewrap's ``/dev``
binds the host's own ``/dev/null``, ``/dev/zero``, ``/dev/full``, ``/dev/random`` and
``/dev/urandom`` into each one. A process may take POSIX byte-range locks on any range of a file
it can open, whoever owns it, and a process elsewhere learns each range's state by trying to lock
it (``F_SETLK`` fails with ``EAGAIN``). So one sandbox writes 64 bits per round into the lock
table of ``/dev/null`` and another reads them back exactly, as root (a uid per sandbox changes
nothing: locks are not counted per user) and as a user: issue 20's hidden-test leak, from a
grading's code under test to a live episode, at any bandwidth. Each sandbox must see a lock
table of its own (or none). Likewise an inotify watch on ``/dev/null`` sees every open of that
inode on the host, the neighbours' included: another channel, and a view of the host's activity.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import threading
from pathlib import Path

import pytest

from proofgym.runtimes.sandbox import SandboxRuntime
from proofgym.tools import ToolResult
from tests.conftest import require_tool
from tests.security.conftest import python_inside
from tests.security.test_attack_neighbour_channels import (
    _HOLD,
    _LIBC,
    _LIMITS,
    _holders,
    _wait_for_holder,
    held,
    hold_and_probe,
    read_while_grading_holds,
)

pytestmark = [pytest.mark.sandbox, pytest.mark.xfail(
    os.geteuid() != 0, strict=True,
    reason=("known gap without root, docs/threat-model.md ('The downgrade'): an unprivileged user "
            "cannot make device nodes, so /dev/null and friends are the host's inodes, shared"))]




@pytest.fixture
def task_snap(tmp_path: Path) -> Path:
    """A task whose one test imports ``m``: the code under test runs at import."""
    require_tool("bwrap")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_m.py").write_text("import m\n\n\ndef test_f():\n    assert m.f() == 1\n")
    (tmp_path / "m.py").write_text("def f():\n    return 0\n")
    return tmp_path

#: Devices bwrap binds from the host (``--dev``): the same inode in every sandbox.
DEVICES = ("/dev/null", "/dev/zero", "/dev/urandom")

_WRITE = """
import fcntl
fd = os.open({path!r}, os.O_RDWR)
for k in range(64):  # bit k of the value: a write lock on byte k
    if ({value} >> k) & 1:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, k)
HELD = {value}
"""

_READ = """
import fcntl
fd = os.open({path!r}, os.O_RDWR)
value = 0
for k in range(64):
    try:
        fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB, 1, k)
        fcntl.lockf(fd, fcntl.LOCK_UN, 1, k)
    except OSError:  # someone else holds byte k
        value |= 1 << k
print("READ", value)
"""


#: The same 64 bits as open-file-description locks (``F_OFD_SETLK``, read with ``F_OFD_GETLK``,
#: which needs no lock of the reader's own).
_OFD_WRITE = """
import fcntl, struct
fd = os.open({path!r}, os.O_RDWR)
for k in range(64):
    if ({value} >> k) & 1:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack("hhqqi4x", fcntl.F_WRLCK, 0, k, 1, 0))
HELD = {value}
"""

_OFD_READ = """
import fcntl, struct
fd = os.open({path!r}, os.O_RDONLY)
value = 0
for k in range(64):
    got = fcntl.fcntl(fd, fcntl.F_OFD_GETLK, struct.pack("hhqqi4x", fcntl.F_WRLCK, 0, k, 1, 0))
    if struct.unpack("hhqqi4x", got)[0] != fcntl.F_UNLCK:
        value |= 1 << k
print("READ", value)
"""

#: Whole-file ``flock``: one bit per shared device.
_FLOCK_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
_FLOCK_WRITE = """
import fcntl
held = []
for k, dev in enumerate({devices!r}):
    if ({value} >> k) & 1:
        fd = os.open(dev, os.O_RDONLY)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.append(fd)
HELD = {value}
"""
_FLOCK_READ = """
import fcntl
value = 0
for k, dev in enumerate({devices!r}):
    fd = os.open(dev, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        value |= 1 << k
    os.close(fd)
print("READ", value)
"""


def _read(result: ToolResult) -> int:
    found = re.findall(r"^READ (\d+)$", result.output, re.M)
    assert found, f"the reader did not run: {result}"
    return int(found[0])


def _values() -> tuple[int, int]:
    """Two different values (their low 5 bits too, for the 5 bits of ``flock``)."""
    a = secrets.randbits(64)
    return a, a ^ 0b10101


@pytest.mark.parametrize("path,kind", [*((d, "posix") for d in DEVICES), *((d, "ofd") for d in DEVICES),
                                       ("the shared devices", "flock")])
def test_locks_taken_next_door_cannot_be_read(two, path: str, kind: str):
    """POSIX byte-range locks, open-file-description locks and whole-file ``flock`` (one bit per
    shared device) on devices every sandbox shares."""
    hog, victim = two
    seen = {}
    for value in _values():
        if kind == "flock":
            value &= 0b11111
            write = _FLOCK_WRITE.format(devices=_FLOCK_DEVICES, value=value)
            read = _FLOCK_READ.format(devices=_FLOCK_DEVICES)
        else:
            write = (_WRITE if kind == "posix" else _OFD_WRITE).format(path=path, value=value)
            read = (_READ if kind == "posix" else _OFD_READ).format(path=path)
        hog_out, probe = hold_and_probe(hog, write, victim, read)
        assert held(hog_out) == value, hog_out
        seen[value] = _read(probe)
    first, second = seen.values()
    assert first == second, (
        f"a sandbox reads the {kind} locks its neighbour holds on {path}: it wrote "
        f"{list(seen)} and the other read {list(seen.values())}")


def test_a_grading_sandbox_cannot_signal_a_live_episode_through_locks(task_snap: Path):
    """The code under test of a grading writes 64 bits into ``/dev/null``'s lock table; a live
    episode of the same task reads them."""
    episode = SandboxRuntime(limits=_LIMITS)
    try:
        seen = {value: _read(read_while_grading_holds(
            task_snap, episode, _WRITE.format(path="/dev/null", value=value),
            _READ.format(path="/dev/null"))) for value in _values()}
    finally:
        episode.close()
    first, second = seen.values()
    assert first == second, (
        f"a live episode reads what the code under test of a grading writes into /dev/null's "
        f"locks: sent {list(seen)}, read {list(seen.values())}")


#: Watch ``/dev/null`` for opens, say so (the host's cue), count the events until released.
_WATCH = """
import select, threading
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])  # before the reader thread starts
ino = libc.inotify_init1(0)
assert libc.inotify_add_watch(ino, b"/dev/null", 0x20) >= 0, err()  # IN_OPEN
events = [0]


def read_events():  # read as they come: identical events still queued are merged into one
    while True:
        events[0] += len(os.read(ino, 1 << 16)) // 16  # a watched file's events carry no name


threading.Thread(target=read_events, daemon=True).start()
HELD = 1
""" + _HOLD + """
print("EVENTS", events[0])
"""

#: Spaced out, so that the watcher reads each open as its own event.
_OPENS = ("import time\nfor _ in range({n}):\n    os.close(os.open('/dev/null', os.O_WRONLY))\n"
          "    time.sleep(0.002)\nprint('OPENED')\n")


def test_opens_of_a_device_next_door_cannot_be_watched(two):
    """The watcher counts IN_OPEN events on its ``/dev/null`` while its neighbour opens its own
    ``/dev/null`` 0 or 400 times; the counts must not tell the two apart (the host's own opens
    in that second are a few dozen here)."""
    watcher, opener = two
    seen = {}
    for n in (0, 400):
        comm = f"pg{secrets.token_hex(5)}"
        out: list = []
        runner = threading.Thread(target=lambda c=comm, o=out: o.append(python_inside(
            watcher, _LIBC + _WATCH.replace("{comm}", c).replace("{hold_s}", "60"))))
        runner.start()
        try:
            pid = _wait_for_holder(comm, runner, "the watcher")
            opened = python_inside(opener, _LIBC + _OPENS.format(n=n))
            assert "OPENED" in opened.output, opened
            os.kill(pid, signal.SIGUSR1)
        finally:
            runner.join(60)
        assert not _holders(comm) and out, "the watcher did not finish"
        found = re.findall(r"^EVENTS (\d+)$", out[0].output, re.M)
        assert found, out[0]
        seen[n] = int(found[0])
    assert seen[400] - seen[0] < 150, (
        f"a sandbox's inotify watch on /dev/null counts its neighbour's opens: {seen[0]} events "
        f"next to 0 opens, {seen[400]} next to 400")
