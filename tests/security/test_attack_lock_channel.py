"""Attack: file locks on an inode every sandbox shares, a channel no uid separates.

A lock belongs to an inode, and some inodes are the same in every sandbox: bubblewrap's ``/dev``
binds the host's own ``/dev/null``, ``/dev/zero``, ``/dev/full``, ``/dev/random`` and
``/dev/urandom`` into each one. A process may take POSIX byte-range locks on any range of a file
it can open, whoever owns it, and a process elsewhere learns each range's state by trying to lock
it (``F_SETLK`` fails with ``EAGAIN``). So one sandbox writes 64 bits per round into the lock
table of ``/dev/null`` and another reads them back exactly, as root (a uid per sandbox changes
nothing: locks are not counted per user) and as a user: issue 20's hidden-test leak, from a
grading's code under test to a live episode, at any bandwidth. Each sandbox must see a lock
table of its own (or none).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from proofgym.runtimes.sandbox import SandboxRuntime
from proofgym.tools import ToolResult
from tests.conftest import require_tool
from tests.security.test_attack_neighbour_channels import (
    _LIMITS,
    held,
    hold_and_probe,
    read_while_grading_holds,
)

pytestmark = pytest.mark.sandbox


@pytest.fixture
def two() -> Iterator[tuple[SandboxRuntime, SandboxRuntime]]:
    require_tool("bwrap")
    a, b = SandboxRuntime(limits=_LIMITS), SandboxRuntime(limits=_LIMITS)
    try:
        yield a, b
    finally:
        a.close()
        b.close()


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


def _read(result: ToolResult) -> int:
    found = re.findall(r"^READ (\d+)$", result.output, re.M)
    assert found, f"the reader did not run: {result}"
    return int(found[0])


def _values() -> tuple[int, int]:
    a, b = secrets.randbits(64) | 1, secrets.randbits(64) | 1
    return (a, b) if a != b else (a, b ^ 2)


@pytest.mark.parametrize("path", DEVICES)
def test_locks_taken_next_door_cannot_be_read(two, path: str):
    hog, victim = two
    seen = {}
    for value in _values():
        hog_out, probe = hold_and_probe(hog, _WRITE.format(path=path, value=value), victim,
                                        _READ.format(path=path))
        assert held(hog_out) == value, hog_out
        seen[value] = _read(probe)
    first, second = seen.values()
    assert first == second, (
        f"a sandbox reads the byte-range locks its neighbour holds on {path}: it wrote "
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
