"""Shared pieces of the sandbox tests (real bubblewrap sandboxes, nothing mocked)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from proofgym.runtimes.sandbox import SandboxLimits, SandboxRuntime
from tests.conftest import require_tool

FAST_LIMITS = SandboxLimits(command_timeout_s=3.0, memory_mb=512, max_processes=64,
                            max_output_bytes=256 * 1024, max_output_chars=4096,
                            max_file_size_mb=16)


@pytest.fixture
def sandbox(tmp_path) -> Iterator[SandboxRuntime]:
    require_tool("bwrap")
    snap = tmp_path / "snapshot"
    (snap / "pkg").mkdir(parents=True)
    (snap / "pkg" / "__init__.py").write_text("VALUE = 1\n")
    (snap / "README.md").write_text("hello\n")
    (snap / "old").mkdir()
    (snap / "old" / "a.txt").write_text("a\n")
    rt = SandboxRuntime(snap, limits=FAST_LIMITS)
    try:
        yield rt
    finally:
        rt.close()


def bash(rt: SandboxRuntime, command: str):
    return rt.execute("bash", {"command": command})
