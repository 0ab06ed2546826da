"""Attack, end to end: a hidden test's source reaches a live agent episode during its grading.

Issue 20's leak, without inotify: the code under test, imported by a hidden test in the grading
sandbox, finds the generated test file that imports it (its caller's frame), and writes the
file's first 256 bytes, a bit per byte range, into the lock table of ``/dev/null`` (the host's
device, bound into every sandbox, see ``test_attack_lock_channel.py``). A live episode of the
same task reads the bits back while the grading waits. The episode must learn nothing of the
hidden test.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import signal
import threading
from pathlib import Path

import pytest

from proofgym.runtimes.sandbox import SandboxRuntime
from proofgym.verify.sandboxed.program import run_pytest
from tests.conftest import require_tool
from tests.security.conftest import python_inside
from tests.security.test_attack_neighbour_channels import _HOLD, _LIBC, _LIMITS, _holders, _wait_for_holder

pytestmark = [pytest.mark.sandbox, pytest.mark.xfail(
    os.geteuid() != 0, strict=True,
    reason=("known gap without root, docs/threat-model.md ('The downgrade'): the channel here is "
            "the lock table of the host's /dev/null, which an unprivileged user cannot replace with "
            "device nodes of the sandbox's own"))]

_HIDDEN = b'from m import f\n\n\ndef test_hidden_secret():\n    assert f("kiwi-7f3c") == 42\n'
_BYTES = 256
_BASE = 1 << 20  # where the bits go in /dev/null's lock table

#: The code under test: at import, leak the importing test file's head, then wait for release.
_LEAK = """
import fcntl, inspect
source = b""
for frame in inspect.stack():
    if frame.filename.startswith("/workspace/") and not frame.filename.endswith("/m.py"):
        with open(frame.filename, "rb") as fh:
            source = fh.read()[:BYTES]
        break
fd = os.open("/dev/null", os.O_RDWR)
for i, byte in enumerate(source):
    for bit in range(8):
        if byte >> bit & 1:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, BASE + 8 * i + bit)
HELD = len(source)
""".replace("BYTES", str(_BYTES)).replace("BASE", str(_BASE))

#: The live episode: read the bits back.
_RECEIVE = """
import fcntl
fd = os.open("/dev/null", os.O_RDWR)
out = bytearray(BYTES)
for i in range(BYTES):
    for bit in range(8):
        try:
            fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB, 1, BASE + 8 * i + bit)
            fcntl.lockf(fd, fcntl.LOCK_UN, 1, BASE + 8 * i + bit)
        except OSError:
            out[i] |= 1 << bit
print("RECEIVED", bytes(out).rstrip(b"\\0").hex())
""".replace("BYTES", str(_BYTES)).replace("BASE", str(_BASE))


def test_a_live_episode_cannot_read_a_hidden_test_while_it_is_graded(tmp_path: Path):
    require_tool("bwrap")
    (tmp_path / "m.py").write_text("def f(x):\n    return 0\n")
    episode = SandboxRuntime(tmp_path, limits=_LIMITS)
    comm = f"pg{secrets.token_hex(5)}"
    module = _LIBC + _LEAK + _HOLD.format(comm=comm, hold_s=30) + "\n\ndef f(x):\n    return 0\n"
    graded: list = []
    grading = threading.Thread(target=lambda: graded.append(run_pytest(
        tmp_path, {"m.py": module.encode()}, tests=["tests/test_hidden.py"],
        hidden={"tests/test_hidden.py": _HIDDEN}, timeout_s=90, test_timeout_s=60)))
    grading.start()
    try:
        _wait_for_holder(comm, grading, "the code under test")
        received = python_inside(episode, _LIBC + _RECEIVE)
    finally:
        while grading.is_alive():  # release every test process that waits (test and mutant)
            for pid in _holders(comm):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGUSR1)
            grading.join(0.1)
        episode.close()
    assert graded, "the grading did not finish"
    found = re.findall(r"^RECEIVED ([0-9a-f]*)$", received.output, re.M)
    assert found, received
    leaked = bytes.fromhex(found[0])
    assert b"def test_" not in leaked and b"assert" not in leaked, (
        f"a live episode read a hidden test during its grading: {leaked!r}")
