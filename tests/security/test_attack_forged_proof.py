"""Attack: the code under test forges ``run_program``'s proof that a check ran to its end.

``run_program(..., proof=True)`` runs a Python check program under a grader epilogue that, once
the program's last statement has run, proves it to the host on a socket (ask, nonce, answer);
``plain_values=True`` also wraps every comparison operand of the check in a guard that refuses
objects whose comparison methods are not the builtin types' own. Both live in the check's own
process, and so does the code under test the check imports: it can speak the protocol itself
and exit before any assertion fails, or replace the guard with the identity and return an
always-equal object. A check program graded by ``ok`` must not pay either.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from proofgym.verify.sandboxed.program import run_program
from tests.conftest import require_tool

pytestmark = pytest.mark.sandbox

_CHECK = b"from m import double\nassert double(3) == 6, 'wrong'\nassert double(5) == 10\nprint('checked')\n"
_FIXED = b"def double(x):\n    return 2 * x\n"

#: At import (the check's first statement): ask on every socket it holds, answer "finished"
#: with the nonce that comes back, exit 0; the check's assertions never run.
_FORGES_THE_EPILOGUE = b"""import os
import socket
import stat

for fd in range(3, 256):
    try:
        if not stat.S_ISSOCK(os.fstat(fd).st_mode):
            continue
        s = socket.socket(fileno=os.dup(fd))
        s.settimeout(2)
        s.sendall(b"?")
        nonce = b""
        while len(nonce) < 16:
            chunk = s.recv(16 - len(nonce))
            if not chunk:
                break
            nonce += chunk
    except OSError:
        continue
    if len(nonce) == 16:
        s.sendall(bytes([0]) + nonce)
        os._exit(0)


def double(x):
    return x + 2
"""

_ALWAYS_EQUAL = b"""class Anything:
    def __eq__(self, other):
        return True

    __hash__ = object.__hash__


def double(x):
    return Anything()
"""

#: The same always-equal answer, with the guard the check's comparisons call replaced first.
_DISARMS_THE_GUARD = b"""import builtins
import sys

builtins.proofgym_plain = sys.modules["__main__"].proofgym_plain = lambda value: value
""" + _ALWAYS_EQUAL


@pytest.fixture
def snap(tmp_path: Path) -> Path:
    root = tmp_path / "snap"
    root.mkdir()
    (root / "m.py").write_text("def double(x):\n    return x + 2\n")
    return root


def _check(snap: Path, module: bytes):
    return run_program(snap, {"m.py": module}, argv=["python3", "check.py"],
                       hidden={"check.py": _CHECK}, timeout_s=60, proof=True, plain_values=True)


def test_the_honest_fix_is_finished_and_ok(snap: Path):
    require_tool("bwrap")
    run = _check(snap, _FIXED)
    assert run.ok and run.finished is True and run.stdout == b"checked\n", run


def test_an_always_equal_answer_is_refused_by_the_guard(snap: Path):
    """The control for the disarmed guard below: the guard itself holds."""
    require_tool("bwrap")
    run = _check(snap, _ALWAYS_EQUAL)
    assert not run.ok and b"checked" not in run.stdout and b"plain value" in run.stderr, run


@pytest.mark.xfail(strict=True, reason="known gap, docs/threat-model.md ('a pass without a finished "
                   "test'): the proof and the guard live in the check's own process, which the code "
                   "under test shares; code written against them forges both (run_program has no "
                   "mutants to catch it)")
@pytest.mark.parametrize("module", ["forges_the_epilogue", "disarms_the_guard"])
def test_the_code_under_test_cannot_prove_a_check_it_failed(snap: Path, module: str):
    require_tool("bwrap")
    source = {"forges_the_epilogue": _FORGES_THE_EPILOGUE, "disarms_the_guard": _DISARMS_THE_GUARD}
    run = _check(snap, source[module])
    assert not run.ok and run.finished is not True, (
        f"the code under test ({module.replace('_', ' ')}) made a failed check ok: {run}")
