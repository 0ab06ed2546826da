"""Attack: one test process learns another test's source, or leaves something for the next one.

Mutants (:mod:`proofgym.verify.sandboxed.mutants`) are only worth anything if the code under test, running
inside one test's process, cannot see the other generated tests: otherwise it pairs a test with
its mutant and passes one of each. Two ways to see them:

* in memory: the test process is forked from the runner, which received every generated test
  over a pipe; the agent's code walks ``gc.get_objects()``, their referents and the stack's
  frames, or reads every writable mapping of its own address space raw (freed memory
  included), looking for another test's text;
* through the file system or IPC: test process A writes what it saw to ``/tmp``,
  ``/workspace``, ``/dev/shm`` or a System V shared memory segment (or changes, deletes or hides
  a workspace file), and test process B reads it.

Each hidden test asks the agent's code whether it found anything and passes only if it found
nothing; mutants are off, so every test must pass.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from proofgym.verify.sandboxed import run_tests_isolated
from tests.conftest import require_tool

pytestmark = pytest.mark.sandbox

_NAMES = ("alpha", "bravo", "charlie", "delta", "echo")

_SNOOPER = b'''
import gc, re, sys

_MARK = re.compile(rb"SECRETMARK_[a-z]+")


def _text(obj):
    if isinstance(obj, str):
        return obj.encode("utf-8", "replace")
    if isinstance(obj, (bytes, bytearray)):
        return bytes(obj)
    if isinstance(obj, memoryview):
        try:
            return obj.tobytes()
        except (ValueError, TypeError):
            return b""
    return b""


def snoop(mine):
    found = set()
    seen = []
    for obj in gc.get_objects():
        seen.append(obj)
        seen.extend(gc.get_referents(obj))
    frame = sys._getframe()
    while frame is not None:
        seen.extend(frame.f_locals.values())
        for value in frame.f_locals.values():
            seen.extend(gc.get_referents(value))
        frame = frame.f_back
    for obj in seen:
        found.update(m.decode() for m in _MARK.findall(_text(obj)))
    found.discard(mine)
    return sorted(found)
'''


def _snoop_tests() -> bytes:
    return b"from snooper import snoop\n" + b"".join(
        f"\n\ndef test_{n}():\n    found = snoop('SECRETMARK_{n}')\n"
        f"    assert not found, 'FOUND ' + ';'.join(found)\n".encode() for n in _NAMES)


_RAW_SNOOPER = b'''
import ctypes, re

_MARK = re.compile(rb"SECRETMARK_[a-z]+")


def snoop(mine):
    found = set()
    with open("/proc/self/maps") as f:
        lines = f.read().splitlines()
    for line in lines:
        fields = line.split()
        if not fields[1].startswith("rw") or (len(fields) > 5 and fields[5].startswith("[v")):
            continue
        start, end = (int(x, 16) for x in fields[0].split("-"))
        found.update(m.decode() for m in _MARK.findall(ctypes.string_at(start, end - start)))
    found.discard(mine)
    return sorted(found)
'''


@pytest.mark.parametrize("snooper", [_SNOOPER, _RAW_SNOOPER], ids=["gc-and-frames", "raw-memory"])
def test_a_test_process_finds_no_other_tests_source_in_its_memory(tmp_path: Path, snooper: bytes):
    require_tool("bwrap")
    (tmp_path / "tests").mkdir()
    ids = [f"tests/test_s.py::test_{n}" for n in _NAMES]
    run = run_tests_isolated(tmp_path, {"snooper.py": snooper}, tests=ids,
                             hidden={"tests/test_s.py": _snoop_tests()}, mutants=False,
                             timeout_s=60)
    assert run.results == {i: "passed" for i in ids}, (run.results, run.messages, run.report_error)


_LEAVER = b'''
import ctypes, os

_KEY = 0x5EED
_libc = ctypes.CDLL(None, use_errno=True)
_PLACES = ("/tmp", "/workspace", "/dev/shm", os.environ.get("HOME", "/tmp"))


def leave_and_look(mine):
    found = []
    for place in _PLACES:
        try:
            names = os.listdir(place)
        except OSError:
            continue
        found += [f"{place}/{n}" for n in names if n.startswith("leak-")]
    if os.path.lexists("/workspace/hide"):
        found.append("/workspace/hide")
    try:
        with open("/workspace/keep.txt") as f:
            if f.read() != "pristine\\n":
                found.append("keep.txt changed")
        if os.stat("/workspace/keep.txt").st_mtime_ns == 12345 * 10**9:
            found.append("keep.txt mtime")
    except OSError as exc:
        found.append(f"keep.txt: {exc}")
    if not os.path.exists("/workspace/gone.txt"):
        found.append("gone.txt deleted")
    if _libc.shmget(_KEY, 0, 0) >= 0:
        found.append("shm")
    if _libc.semget(_KEY + 1, 0, 0) >= 0:
        found.append("sem")
    if _libc.msgget(_KEY + 2, 0) >= 0:
        found.append("msg")
    # now leave all of it for the next test process
    for place in _PLACES:
        try:
            with open(f"{place}/leak-{mine}", "w") as f:
                f.write(mine)
        except OSError:
            continue
    if os.access("/workspace/keep.txt", os.W_OK):  # not yet hidden by an earlier test
        with open("/workspace/keep.txt", "a") as f:
            f.write(mine)
        os.utime("/workspace/keep.txt", (12345, 12345))
        os.chmod("/workspace/keep.txt", 0)
    if os.path.exists("/workspace/gone.txt"):
        os.unlink("/workspace/gone.txt")
    if not os.path.exists("/workspace/hide"):
        os.makedirs("/workspace/hide/deeper")
        with open("/workspace/hide/deeper/note", "w") as f:
            f.write(mine)
        os.chmod("/workspace/hide/deeper", 0)
        os.chmod("/workspace/hide", 0)
    _libc.shmget(_KEY, 4096, 0o1000 | 0o600)
    _libc.semget(_KEY + 1, 1, 0o1000 | 0o600)
    _libc.msgget(_KEY + 2, 0o1000 | 0o600)
    return found
'''


def test_nothing_a_test_process_leaves_reaches_the_next_one(tmp_path: Path):
    require_tool("bwrap")
    (tmp_path / "tests").mkdir()
    (tmp_path / "keep.txt").write_text("pristine\n")
    (tmp_path / "gone.txt").write_text("here\n")
    tests = b"from leaver import leave_and_look\n" + b"".join(
        f"\n\ndef test_{n}():\n    found = leave_and_look('{n}')\n"
        f"    assert not found, 'FOUND ' + ';'.join(found)\n".encode() for n in _NAMES)
    ids = [f"tests/test_l.py::test_{n}" for n in _NAMES]
    run = run_tests_isolated(tmp_path, {"leaver.py": _LEAVER}, tests=ids,
                             hidden={"tests/test_l.py": tests}, mutants=False, timeout_s=60)
    assert run.results == {i: "passed" for i in ids}, (run.results, run.messages, run.report_error)
