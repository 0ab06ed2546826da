"""Attack: fill the host's disk through the workspace.

``SandboxLimits.workspace_mb`` bounds what a runtime's episodes may write to the workspace. As
root the overlay's changes live on a tmpfs of that size; as an ordinary user they go to the
host's disk, where nothing but the per-file size limit stopped them: an episode could write
file after file until the disk is full. The attack here writes only 90 MB (never enough to harm
the host) against a 48 MB limit.
"""

from __future__ import annotations

import os

import pytest

from proofgym.runtimes.sandbox import SandboxLimits, SandboxRuntime
from tests.conftest import require_tool
from tests.security.conftest import bash

pytestmark = pytest.mark.sandbox

_LIMITS = SandboxLimits(command_timeout_s=30.0, max_file_size_mb=16, workspace_mb=48,
                        max_output_bytes=256 * 1024, max_output_chars=4096)


@pytest.mark.xfail(os.geteuid() != 0, strict=True,
                   reason="known gap, docs/threat-model.md: without root the upper directory is an "
                          "ordinary host directory (no tmpfs of workspace_mb); only "
                          "max_file_size_mb and the artifact limits bound an episode")
def test_the_workspace_size_limit_holds():
    require_tool("bwrap")
    with SandboxRuntime(limits=_LIMITS) as rt:
        r = bash(rt, "for i in 1 2 3 4 5 6; do head -c 15M /dev/zero > /workspace/f$i "
                     "|| echo NO-SPACE; done; du -sm /workspace | cut -f1")
        used = int(r.output.strip().splitlines()[-1])
        assert used <= 48, f"the workspace holds {used} MB, over its 48 MB limit: {r.output}"
        assert "NO-SPACE" in r.output or r.error_kind is not None, r
        bash(rt, "rm -f /workspace/f*")
