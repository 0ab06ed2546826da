"""Attack: learn the host's layout from the kernel's views inside the sandbox.

``/proc/self/mountinfo`` names each mount's source, so it can reveal the overlay's upper, lower
and work directories, staging directories and scratch space; ``/proc/1`` (bubblewrap's init,
started by the host) can reveal the host's ``PATH`` and the full bwrap command line. None of the
host's paths may be readable inside.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from proofgym.runtimes.private_dirs import state_root
from proofgym.runtimes.sandbox import SandboxRuntime
from tests.conftest import require_tool
from tests.sandbox_helpers import FAST_LIMITS
from tests.security.conftest import bash

pytestmark = pytest.mark.sandbox


@pytest.fixture
def task_rt(tmp_path):
    require_tool("bwrap")
    snap = tmp_path / "host-task-snapshot-b81d"
    snap.mkdir()
    (snap / "main.py").write_text("print('hi')\n")
    runtime = SandboxRuntime(snap, limits=FAST_LIMITS)
    try:
        yield runtime, snap
    finally:
        runtime.close()


def _host_markers(runtime: SandboxRuntime, snap: Path) -> list[str]:
    changes = runtime.workspace_changes_dir
    return [str(snap), snap.name, str(changes), str(changes.parent), "/tmp/proofgym",
            str(state_root()), "proofgym-sandbox-", "proofgym-system-"]


def test_mountinfo_shows_no_host_path(task_rt):
    runtime, snap = task_rt
    r = bash(runtime, "cat /proc/self/mountinfo /proc/1/mountinfo; echo; cat /proc/self/mounts")
    assert " /workspace " in r.output, r.output  # the probe read the real table
    leaks = [m for m in _host_markers(runtime, snap) if m in r.output]
    assert not leaks, f"host paths in the sandbox's mount table: {leaks}\n{r.output}"


def test_environ_of_the_sandbox_init_holds_no_host_values(task_rt):
    runtime, _snap = task_rt
    r = bash(runtime, "for p in /proc/[0-9]*; do tr '\\0' '\\n' < $p/environ; done 2>/dev/null; "
                      "echo END")
    assert "END" in r.output and "PATH=" in r.output, r.output  # the shell's own environ is there
    host_path = os.environ.get("PATH", "")
    assert host_path not in r.output, f"the host's PATH is readable inside:\n{r.output}"
    # entries only the host has (a pyenv or venv, a home directory): none may show
    own = {"/usr/bin", "/bin", "/usr/sbin", "/sbin", "/usr/local/bin", "/usr/local/sbin"}
    leaked = [e for e in host_path.split(":") if e and e not in own and e in r.output]
    assert not leaked, f"host PATH entries readable inside: {leaked}"


def test_command_lines_inside_show_no_host_path(task_rt):
    runtime, snap = task_rt
    r = bash(runtime, "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done 2>/dev/null; "
                      "echo END")
    assert "END" in r.output and "bash" in r.output, r.output
    leaks = [m for m in _host_markers(runtime, snap) if m in r.output]
    assert not leaks, f"host paths in command lines inside: {leaks}\n{r.output}"


def test_cgroup_paths_inside_do_not_name_the_host_process(task_rt):
    runtime, _snap = task_rt
    r = bash(runtime, "cat /proc/self/cgroup /proc/1/cgroup")
    assert "memory" in r.output or "0::" in r.output, r.output
    assert f"-{os.getpid()}-" not in r.output and "proofgym" not in r.output, (
        f"the host's cgroup layout (and the eval process's pid) is readable inside:\n{r.output}")
