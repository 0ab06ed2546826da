"""Attack: run the agent's code where it is graded, not where it was written.

The hidden tests import the agent's code, so whatever a module does at import runs again in the
grading sandbox (``run_tests_isolated``). That sandbox must hold as the episode's does: no host
sysctl written, no host key read, a seccomp filter in place, no host uid 0.
"""

from __future__ import annotations

import ctypes
import secrets
from pathlib import Path

import pytest

from proofgym.verify.sandboxed import run_tests_isolated
from tests.conftest import require_tool
from tests.security.conftest import KEY_TAG, invalidate_host_keys

pytestmark = pytest.mark.sandbox

_SYSCTL = Path("/proc/sys/fs/lease-break-time")
_libc = ctypes.CDLL(None, use_errno=True)

_AGENT_MODULE = '''
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
FOUND = []
try:
    with open("/proc/sys/fs/lease-break-time", "w") as f:
        f.write("{forged}")
    FOUND.append("sysctl-written")
except OSError:
    pass
key = libc.syscall(250, 10, -3, b"user", b"{desc}", 0)  # KEYCTL_SEARCH, session keyring
if key > 0:
    buf = ctypes.create_string_buffer(128)
    n = libc.syscall(250, 11, key, buf, 128)
    FOUND.append("key:" + buf.raw[:max(n, 0)].decode(errors="replace"))
status = open("/proc/self/status").read()
if "Seccomp:\\t2" not in status:
    FOUND.append("no-seccomp")
'''

_HIDDEN_TEST = '''
import agent_mod

def test_nothing_reached_the_host():
    assert agent_mod.FOUND == [], "GRADING-SANDBOX-BREACH " + repr(agent_mod.FOUND)
'''


def test_code_imported_by_the_hidden_tests_cannot_reach_the_host(tmp_path):
    require_tool("bwrap")
    snap = tmp_path / "task"
    snap.mkdir()
    (snap / "README.md").write_text("task\n")
    desc = f"{KEY_TAG}-grade-{secrets.token_hex(4)}"
    secret = f"GRADE-SECRET-{secrets.token_hex(6)}".encode()
    before = _SYSCTL.read_text()
    forged = str(int(before) + 23)
    invalidate_host_keys()
    key = _libc.syscall(248, b"user", desc.encode(), secret, len(secret), ctypes.c_int(-3))
    assert key > 0, ctypes.get_errno()
    try:
        run = run_tests_isolated(
            snap, {"agent_mod.py": _AGENT_MODULE.format(forged=forged, desc=desc).encode()},
            tests=["test_hidden_probe.py"], hidden={"test_hidden_probe.py": _HIDDEN_TEST.encode()},
            timeout_s=60)
        after = _SYSCTL.read_text()
    finally:
        if _SYSCTL.read_text() != before:
            _SYSCTL.write_text(before)
        invalidate_host_keys()
    assert after == before, "code run by the grader changed the host's fs.lease-break-time"
    assert secret.decode() not in run.output, "code run by the grader read a key of the host"
    assert run.results, f"the probe test did not run: {run.report_error} {run.output[-1500:]}"
    assert set(run.results.values()) == {"passed"}, run.output[-1500:]
