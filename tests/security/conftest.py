"""Shared pieces of the attack suite: a fresh real sandbox per test and host-side helpers.

Every test here is an attack a hostile policy can run through the public API. It asserts what
must hold once the sandbox is hardened (issue 9), so each one was red on the unhardened sandbox.
Anything an attack may change on the host (sysctls, keys, mounts) is restored by the test itself.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from proofgym.runtimes.sandbox import SandboxLimits, SandboxRuntime
from proofgym.tools import ToolResult
from tests.conftest import require_tool
from tests.sandbox_helpers import FAST_LIMITS

_libc = ctypes.CDLL(None, use_errno=True)
_SYS_KEYCTL = 250  # x86_64
_KEYCTL_INVALIDATE = 21

#: Every key an attack creates has this in its description, so the host can find and remove it.
KEY_TAG = "proofgym-attack"

#: Root-only checks: as an ordinary user the sandbox's uid is not host root to begin with.
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="the attack needs proofgym to run as root")


#: Limits for the attacks between two concurrent sandboxes: room for a hog to fill a counter.
NEIGHBOUR_LIMITS = SandboxLimits(command_timeout_s=90.0, memory_mb=512, max_processes=64,
                                 max_output_bytes=256 * 1024, max_output_chars=8192,
                                 max_file_size_mb=16)


@pytest.fixture
def two() -> Iterator[tuple[SandboxRuntime, SandboxRuntime]]:
    """Two fresh sandboxes running at once (a hog and its neighbour)."""
    require_tool("bwrap")
    a, b = SandboxRuntime(limits=NEIGHBOUR_LIMITS), SandboxRuntime(limits=NEIGHBOUR_LIMITS)
    try:
        yield a, b
    finally:
        a.close()
        b.close()


@pytest.fixture
def rt() -> Iterator[SandboxRuntime]:
    """A fresh sandbox over an empty workspace, with short limits."""
    require_tool("bwrap")
    runtime = SandboxRuntime(limits=FAST_LIMITS)
    try:
        yield runtime
    finally:
        runtime.close()


def bash(runtime: SandboxRuntime, command: str) -> ToolResult:
    return runtime.execute("bash", {"command": command})


def python_inside(runtime: SandboxRuntime, source: str) -> ToolResult:
    """Run ``source`` with the sandbox's Python (a heredoc, so no quoting games)."""
    return bash(runtime, f"python - <<'PROOFGYM_EOF'\n{source}\nPROOFGYM_EOF")


def host_keys(tag: str = KEY_TAG) -> list[str]:
    """Lines of the host's ``/proc/keys`` naming ``tag``."""
    return [ln for ln in Path("/proc/keys").read_text().splitlines() if tag in ln]


def invalidate_host_keys(tag: str = KEY_TAG) -> None:
    """Remove every key whose description holds ``tag`` (run as the host process)."""
    for line in host_keys(tag):
        _libc.syscall(_SYS_KEYCTL, _KEYCTL_INVALIDATE, int(line.split()[0], 16))


def process_uids(pid: int) -> list[int] | None:
    """Real, effective, saved and file-system uid of ``pid`` as the host sees them."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    line = next(ln for ln in status.splitlines() if ln.startswith("Uid:"))
    return [int(x) for x in line.split()[1:]]
