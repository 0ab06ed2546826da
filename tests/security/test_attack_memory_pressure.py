"""Attack: use the sandbox's memory limit against whatever runs in the sandbox on the host's
behalf.

Files the agent writes to a tmpfs (``/tmp``, and the workspace as root) are memory charged to the
sandbox but held by no process, so when the limit is hit the kernel's OOM killer picks the
largest *process*, which need not be the agent's. A trusted helper inside the sandbox (an init,
a supervisor of the control channel) that the OOM killer takes down turns an out-of-memory
command into a misreport ("timeout") and can take the next call with it. The agent's own
processes must be the ones that die, and the runtime must say so.
"""

from __future__ import annotations

import pytest

from proofgym.runtimes.sandbox import SandboxLimits, SandboxRuntime
from tests.conftest import require_tool
from tests.security.conftest import bash

pytestmark = pytest.mark.sandbox

# a long time limit: nothing here may end as a (false) timeout
_LIMITS = SandboxLimits(command_timeout_s=60.0, memory_mb=256, max_processes=64,
                        max_output_bytes=256 * 1024, max_output_chars=4096, max_file_size_mb=16,
                        tmp_size_mb=512)


@pytest.fixture
def small_rt():
    require_tool("bwrap")
    runtime = SandboxRuntime(limits=_LIMITS)
    try:
        yield runtime
    finally:
        runtime.close()


@pytest.mark.parametrize("where", ["/workspace", "/tmp"])
def test_filling_memory_through_tmpfs_files_is_reported_truthfully(small_rt, where):
    r = bash(small_rt, f"for i in $(seq 40); do head -c 15M /dev/zero > {where}/f$i || "
                       "echo failed $i; done; echo finished")
    assert r.error_kind != "timeout", f"an out-of-memory command was reported as {r}"
    nxt = bash(small_rt, f"rm -f {where}/f*; echo alive")
    if nxt.error_kind is not None and "restarted" in nxt.output:
        nxt = bash(small_rt, f"rm -f {where}/f*; echo alive")
    assert nxt.error_kind != "timeout", f"the call after it was reported as {nxt}"
    # it runs, or it says plainly that memory is what stops it (the files still fill it)
    assert "alive" in nxt.output or (nxt.error_kind is not None and "memory" in nxt.output), nxt
    if "alive" in nxt.output:
        last = bash(small_rt, "echo ok; false")
        assert "ok" in last.output and "[exit code 1]" in last.output, last


def test_an_episode_that_filled_its_memory_does_not_taint_the_next(small_rt):
    # the runtime's episodes (and its prestarted spare) share one memory cgroup: what one episode
    # left there (files, an OOM kill) must not make the next one's first command fail
    # 24 files of 15 MiB: past the 256 MiB limit (as root the workspace is a tmpfs charged to
    # it); as an ordinary user the workspace is on the host's disk, where the 40 written before
    # cost 600 MB of writes and deletions per episode, 19 s of the user pass in all
    for _ in range(8):  # the race between the old episode's clean-up and the next one's start
        bash(small_rt, "for i in $(seq 24); do head -c 15M /dev/zero > /workspace/f$i 2>/dev/null "
                       "|| break; done; echo finished")
        small_rt.reset()
        r = bash(small_rt, "echo fresh; ls /workspace | wc -l")
        assert r.ok and r.output == "fresh\n0", f"the next episode's first command: {r}"
