"""Attack: use a task's own tool to read or write outside the sandbox's workspace.

A ``@tool`` function of a task runs in the host process (as root, when proofgym runs as root)
with the agent's arguments and the runtime's :class:`Sandbox` handle. The agent hands it paths
that leave the workspace (absolute, ``..``) and symlinks it planted that point at host files.
The handle's file methods must act inside the sandbox, on the workspace only: nothing of the
host's files comes back, and nothing outside the workspace is written.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from proofgym.runtimes.sandbox import SandboxRuntime
from proofgym.runtimes.sandbox.tools import Sandbox
from proofgym.tools import tool
from tests.conftest import require_tool
from tests.sandbox_helpers import FAST_LIMITS

pytestmark = pytest.mark.sandbox


@tool
def peek(path: str, sandbox: Sandbox) -> str:
    """Show a file of the workspace.

    Args:
        path: The file.
    """
    return sandbox.read_file(path)


@tool
def note(path: str, text: str, sandbox: Sandbox) -> str:
    """Write a note into the workspace.

    Args:
        path: The file.
        text: What to write.
    """
    sandbox.write_file(path, text)
    return "ok"


@pytest.fixture
def host_secret(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    secret = secrets.token_hex(16)
    path = tmp_path / "host-secret.txt"
    path.write_text(secret)
    path.chmod(0o644)
    yield path, secret


@pytest.fixture
def rt() -> Iterator[SandboxRuntime]:
    require_tool("bwrap")
    runtime = SandboxRuntime(limits=FAST_LIMITS, tools=["bash", peek, note])
    try:
        runtime.reset()
        yield runtime
    finally:
        runtime.close()


def test_the_handle_reads_nothing_outside_the_workspace(rt: SandboxRuntime, host_secret):
    path, secret = host_secret
    made = rt.execute("bash", {"command": f"ln -s {path} host; ln -s / root; ln -s /etc/shadow shadow; "
                                          f"ln -s ../../../../../..{path} up"})
    assert made.ok, made.output
    for target in (str(path), f"../../../../..{path}", f"/workspace/../..{path}", "host", "up",
                   f"root{path}", "/etc/shadow", "shadow", "/proc/1/environ", "/proc/self/environ"):
        result = rt.execute("peek", {"path": target})
        assert secret not in result.output, target
        assert not result.ok or result.output.strip() == "", (target, result.output)


def test_the_handle_writes_nothing_outside_the_workspace(rt: SandboxRuntime, tmp_path: Path):
    outside = tmp_path / "outside"
    outside.mkdir()
    outside.chmod(0o777)  # writable by anyone: only the handle's confinement stops the write
    made = rt.execute("bash", {"command": f"ln -s {outside} out; ln -s {outside}/planted.txt file"})
    assert made.ok, made.output
    for target in (f"{outside}/planted.txt", f"../../../..{outside}/planted.txt", "out/planted.txt",
                   "file", "/tmp/../../" + str(outside).lstrip("/") + "/planted.txt"):
        rt.execute("note", {"path": target, "text": "MARK-" + target})
    assert list(outside.iterdir()) == []
    back = rt.execute("bash", {"command": "cat file out/planted.txt 2>&1; true"})
    assert "MARK-" not in back.output  # not even the sandbox's view of that path was written
