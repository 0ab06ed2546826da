"""Attack: futexes on file pages every sandbox maps, a channel no uid separates.

A futex on a shared file mapping is keyed by the file's inode and page, not by the process: any
process that maps the same page of the same file can wake a waiter there, and ``FUTEX_WAKE``
returns how many it woke. Sandboxes map the same files: the read-only system (``/usr``, the
interpreter) is one tree seen through each sandbox's overlay, whose mappings are of the files
beneath, and so is every file of the task snapshot an episode and its grading have not changed.
So one sandbox wakes (or counts) waiters in another, a bit per page and round: between agent
episodes, and from a grading's code under test (its snapshot files are the live episode's) to
a live episode of the same task. A wake must reach only the sandbox's own waiters.
"""

from __future__ import annotations

import re
import secrets
import threading
from pathlib import Path

import pytest

from proofgym.runtimes.sandbox import SandboxRuntime
from proofgym.tools import ToolResult
from proofgym.verify.sandboxed.program import run_program
from tests.conftest import require_tool
from tests.security.conftest import python_inside
from tests.security.test_attack_neighbour_channels import _LIBC, _LIMITS, _holders, _wait_for_holder

pytestmark = [pytest.mark.sandbox, pytest.mark.xfail(strict=True, reason=(
    "known gap, docs/threat-model.md ('Between concurrent episodes', Not defended): "
    "a futex on a shared mapping is keyed by the file's inode, and the read-only system "
    "and the snapshot's unchanged files are the same inodes in every sandbox; refusing shared "
    "futexes would break process-shared semaphores (multiprocessing)"))]

#: Map ``path`` shared and read-only; ``futex(off, op, ...)`` on the word at ``off``.
_MAP = """
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                      ctypes.c_long]
fd = os.open({path!r}, os.O_RDONLY)
base = libc.mmap(None, 4096, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED: keyed by inode and page
word = ctypes.c_uint32.from_address(base).value


class Timespec(ctypes.Structure):
    _fields_ = [("s", ctypes.c_long), ("ns", ctypes.c_long)]


def futex(op, val, timeout=None):
    return libc.syscall(202, ctypes.c_void_p(base), op, val, timeout, None, 0)
"""

#: Wait on the file's first word (its content, so the wait starts), named so the host sees it.
_WAIT = _MAP + """
libc.prctl(15, {comm!r}.encode(), 0, 0, 0)  # PR_SET_NAME: waiting from here on
rc = futex(0, word, ctypes.byref(Timespec({wait_s}, 0)))  # FUTEX_WAIT, shared
print("WAITED", "woken" if rc == 0 else errno.errorcode.get(ctypes.get_errno()))
"""

_WAKE = _MAP + "print('WOKE', futex(1, 1 << 20))\n"  # FUTEX_WAKE, shared: how many it woke


def _waited(result: ToolResult) -> str:
    found = re.findall(r"^WAITED (\w+)$", result.output, re.M)
    assert found, f"the waiter did not wait: {result}"
    return found[0]


def _woke(result: ToolResult) -> int:
    found = re.findall(r"^WOKE (-?\d+)$", result.output, re.M)
    assert found, f"the waker did not run: {result}"
    return int(found[0])




def _wait_while(waiter: SandboxRuntime, path: str, wake) -> tuple[str, int]:
    """Wait on ``path``'s first word in ``waiter`` (up to 8 s) while ``wake()`` runs elsewhere;
    returns how the wait ended and what the wake reported."""
    comm = f"pg{secrets.token_hex(5)}"
    out: list[ToolResult] = []
    runner = threading.Thread(target=lambda: out.append(python_inside(
        waiter, _LIBC + _WAIT.format(path=path, comm=comm, wait_s=8))))
    runner.start()
    try:
        _wait_for_holder(comm, runner, "the waiter")
        woke = wake()
    finally:
        runner.join(30)
    assert out and not _holders(comm), "the waiter did not end"
    return _waited(out[0]), woke


@pytest.mark.parametrize("path", ["/usr/bin/bash", "/proc/self/exe"])
def test_a_wake_next_door_reaches_no_waiter_here(two, path: str):
    """``/usr/bin/bash`` is the shared system; ``/proc/self/exe`` the shared interpreter."""
    waiter, waker = two
    how, woke = _wait_while(waiter, path,
                            lambda: _woke(python_inside(waker, _LIBC + _WAKE.format(path=path))))
    assert woke == 0 and how == "ETIMEDOUT", (
        f"a futex wake on {path} in one sandbox woke {woke} waiter(s) in another (its wait: {how})")


def test_a_grading_cannot_wake_a_live_episode_through_a_snapshot_file(tmp_path: Path):
    """The grading's code under test (here the program it runs) wakes on a snapshot file the
    agent did not change; a live episode of the same task waits on the same file."""
    require_tool("bwrap")
    (tmp_path / "data.txt").write_text("snapshot data " * 400)
    tmp_path.chmod(0o755)
    (tmp_path / "data.txt").chmod(0o644)
    episode = SandboxRuntime(tmp_path, limits=_LIMITS)
    try:
        def grade_and_wake() -> int:
            run = run_program(tmp_path, {}, argv=["python3", "-c", _LIBC + _WAKE.format(
                path="/workspace/data.txt")], timeout_s=60)
            found = re.findall(r"^WOKE (-?\d+)$", run.stdout_text, re.M)
            assert found, run
            return int(found[0])

        how, woke = _wait_while(episode, "/workspace/data.txt", grade_and_wake)
    finally:
        episode.close()
    assert woke == 0 and how == "ETIMEDOUT", (
        f"a grading's futex wake on a snapshot file woke {woke} waiter(s) in a live episode "
        f"(its wait: {how})")
