"""Limits: runaway commands are contained, reported as typed errors, and the shell goes on."""

from __future__ import annotations

import os
import time
from dataclasses import replace

import pytest

from proofgym.runtimes.sandbox import SandboxLimits, SandboxRuntime
from tests.conftest import require_tool
from tests.sandbox_helpers import FAST_LIMITS, bash

pytestmark = pytest.mark.sandbox


def _next_command_works(rt):
    r = bash(rt, "cd /workspace && echo alive && ls pkg")
    assert r.ok and r.output.startswith("alive"), r.output
    # nothing the contained command started is still running: init, the shell, this pipeline
    assert int(bash(rt, "ps -e -o pid= | wc -l").output) <= 5


def test_infinite_loop_in_a_child_is_killed_and_the_shell_survives(sandbox):
    bash(sandbox, "cd pkg && export KEEP=1")
    r = bash(sandbox, "python -c 'while True: pass' & sleep 1000")
    assert r.error_kind.value == "timeout"
    assert "time limit of 3 s" in r.output
    assert bash(sandbox, 'pwd; echo "$KEEP"').output == "/workspace/pkg\n1"  # same shell
    _next_command_works(sandbox)


def test_busy_loop_in_the_shell_itself_is_killed_and_the_state_kept(sandbox):
    bash(sandbox, "cd pkg && export KEEP=1")
    r = bash(sandbox, "while true; do :; done")
    assert r.error_kind.value == "timeout"
    assert bash(sandbox, 'pwd; echo "$KEEP"').output == "/workspace/pkg\n1"
    _next_command_works(sandbox)


@pytest.fixture
def patient_sandbox(tmp_path):
    """The ``sandbox`` fixture's runtime with a 30 s command limit: as an ordinary user (no
    cgroup) a fork bomb is stopped process by process, which on a host loaded by the rest of
    the suite ran past the 3 s limit once (a timeout, not the process limit being reported)."""
    require_tool("bwrap")
    (tmp_path / "snapshot" / "pkg").mkdir(parents=True)
    (tmp_path / "snapshot" / "pkg" / "__init__.py").write_text("VALUE = 1\n")
    rt = SandboxRuntime(tmp_path / "snapshot", limits=replace(FAST_LIMITS, command_timeout_s=30.0))
    try:
        yield rt
    finally:
        rt.close()


def test_fork_bomb(patient_sandbox):
    r = bash(patient_sandbox, ":(){ :|:& };:")
    assert r.error_kind.value == "execution_error", r
    assert "process limit" in r.output or "were stopped" in r.output
    _next_command_works(patient_sandbox)


def test_fork_bomb_in_the_foreground(sandbox):
    r = bash(sandbox, "python -c 'import os\nwhile True: os.fork()'")
    if r.error_kind is None and os.geteuid() != 0:
        # without a cgroup (an ordinary user) nothing counts the process limit's refusals, and
        # every process of this bomb dies at its first refused fork: once all of them did before
        # the command ended (CI saw it once) it is the command's own failure, as the agent sees
        # it. Contained all the same: the shell lives and nothing is left running (below)
        assert "Resource temporarily unavailable" in r.output and "[exit code 1]" in r.output, r
    else:
        assert r.error_kind is not None, r
        assert r.error_kind.value in ("execution_error", "timeout")
    _next_command_works(sandbox)


def test_two_gigabyte_allocation(sandbox):
    # the address-space limit makes the allocation fail inside the process: it sees MemoryError
    # and exits 1, which is what is reported (out of memory is only a kill the cgroup counted)
    r = bash(sandbox, "python -c 'b = bytearray(2 * 1024**3); print(len(b))'")
    assert "MemoryError" in r.output and "[exit code 1]" in r.output, r.output
    _next_command_works(sandbox)


def test_allocation_of_many_small_blocks(sandbox):
    r = bash(sandbox, "python -c 'x = [bytes(1 << 20) for _ in range(4096)]'")
    assert "MemoryError" in r.output and "[exit code 1]" in r.output, r.output
    _next_command_works(sandbox)


def test_hundred_megabytes_of_output(sandbox):
    start = time.monotonic()
    r = bash(sandbox, "head -c 100000000 /dev/zero | tr '\\0' a")
    assert time.monotonic() - start < 30
    assert r.error_kind.value == "execution_error"
    assert r.truncated and "characters cut by proofgym" in r.output
    assert "output exceeded" in r.output
    assert len(r.output) <= FAST_LIMITS.max_output_chars
    _next_command_works(sandbox)


def test_large_output_under_the_limit_is_cut_with_a_marker_but_not_an_error(sandbox):
    r = bash(sandbox, "seq 1 20000")
    assert r.ok and r.truncated
    assert r.output.startswith("1\n2\n") and r.output.endswith("19999\n20000")
    assert "characters cut by proofgym" in r.output


def test_file_size_limit(sandbox):
    r = bash(sandbox, "head -c 40M /dev/zero > big.bin")
    assert r.error_kind.value == "execution_error" and "larger than the limit" in r.output
    assert bash(sandbox, "stat -c %s big.bin").output == str(16 << 20)
    _next_command_works(sandbox)


@pytest.mark.xfail(os.geteuid() != 0, strict=True,
                   reason="known gap, docs/threat-model.md: without root there is no workspace tmpfs")
def test_the_workspace_cannot_fill_the_disk(tmp_path):
    require_tool("bwrap")
    limits = SandboxLimits(command_timeout_s=20, workspace_mb=24, max_file_size_mb=8)
    with SandboxRuntime(tmp_path, limits=limits) as rt:
        r = bash(rt, "for i in 1 2 3 4 5 6; do head -c 8M /dev/zero > f$i || break; done; du -sm .")
        assert "No space left on device" in r.output
        assert int(r.output.split()[-2]) <= 24
        assert bash(rt, "rm f*; echo ok > small && cat small").output == "ok"


def test_background_processes_do_not_outlive_their_command(sandbox):
    r = bash(sandbox, "sleep 300 & nohup sleep 300 >/dev/null & echo started")
    assert r.error_kind.value == "execution_error"
    assert r.output.startswith("started") and "left 2 process(es) running" in r.output
    assert int(bash(sandbox, "ps -e -o pid= | wc -l").output) <= 5
    assert bash(sandbox, "sleep 0.1 & wait; echo waited").output == "waited"


def test_exit_from_the_shell(sandbox):
    bash(sandbox, "cd pkg")
    r = bash(sandbox, "echo bye; exit 7")
    assert r.ok and r.output == "bye\n[exit code 7]"
    assert bash(sandbox, "pwd").output == "/workspace/pkg"
    _next_command_works(sandbox)


def test_episode_time_budget(tmp_path):
    require_tool("bwrap")
    (tmp_path / "pkg").mkdir()
    limits = SandboxLimits(command_timeout_s=30, episode_time_s=2.0)
    with SandboxRuntime(tmp_path, limits=limits) as rt:
        r = bash(rt, "sleep 20")
        assert r.error_kind.value == "timeout" and "time budget" in r.output
        r = bash(rt, "echo too late")
        assert r.error_kind.value == "denied" and "budget" in r.output
        rt.reset()  # a new episode has a new budget
        assert bash(rt, "echo again").output == "again"


def test_limits_are_validated():
    with pytest.raises(ValueError, match="command_timeout_s"):
        SandboxLimits(command_timeout_s=0)
    with pytest.raises(ValueError, match="max_processes"):
        SandboxLimits(max_processes=2)


def test_a_slow_boot_is_not_counted_against_the_commands_time_limit(tmp_path, monkeypatch):
    """Booting the sandbox on the first call (no pre-booted spare) is the host's time: a busy host
    that slows the boot must not kill the agent's command as a timeout (seen under a loaded
    suite: a 3 s limit spent before the command started)."""
    import dataclasses

    require_tool("bwrap")
    real_boot = SandboxRuntime._boot

    def slow_boot(self, overlay):
        time.sleep(2.0)  # a host stalled for longer than the command's own limit
        return real_boot(self, overlay)

    monkeypatch.setattr(SandboxRuntime, "_boot", slow_boot)
    limits = dataclasses.replace(FAST_LIMITS, command_timeout_s=1.5)
    with SandboxRuntime(tmp_path, limits=limits, prestart=False) as rt:
        r = bash(rt, "sleep 0.2; echo ran")
        assert r.output == "ran", r
        assert bash(rt, "sleep 30").error_kind.value == "timeout"  # the limit itself still holds
