"""Attack: another proofgym instance on the same kernel, in a pid namespace of its own, sweeps
this one's cgroups and scratch space.

A proofgym process removes the empty sandbox cgroups that a dead proofgym process left behind
(the first time it makes one). Whether the owner is dead it tells by the pid in the cgroup's
name, and a pid means something only in the pid namespace it was taken in, while the cgroup
hierarchy is the kernel's: an instance in a container (a pid namespace of its own, the host's
cgroups) sees no such pid, takes a live runtime's cgroup for a leftover and removes it whenever
it is empty (between two sandboxes of an episode). That runtime's next sandbox then fails to
start (``cgroup.procs``: no such file). ``test_attack_id_collision.py`` starts such an instance,
and CI's parallel pass saw neighbouring tests fail that way. Scratch space (named the same way)
in a temp dir both instances share is removed alike, the live runtime's workspaces with it.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from proofgym.runtimes.sandbox import SandboxRuntime
from tests.conftest import REPO, require_tool
from tests.sandbox_helpers import FAST_LIMITS, bash

pytestmark = [pytest.mark.sandbox,
              pytest.mark.skipif(os.geteuid() != 0, reason="writable cgroups and a new pid "
                                 "namespace need root")]

#: The other instance: makes its first sandbox cgroup (which sweeps leftovers first).
_OTHER = ("from proofgym.runtimes.sandbox import cgroups\n"
          "cg = cgroups.create(64 << 20, 8)\n"
          "assert cg is not None, 'no cgroup'\n"
          "cg.remove()\n"
          "print('SWEPT', flush=True)\n")
#: The other instance, sharing this one's temp dir: makes its first scratch space there.
_OTHER_SCRATCH = ("import sys\n"
                  "from proofgym.runtimes.sandbox.scratch import remove_scratch, scratch_dir\n"
                  "remove_scratch(scratch_dir('proofgym-sandbox-', 16, parent=sys.argv[1]))\n"
                  "print('SWEPT', flush=True)\n")


def _other_instance(source: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``source`` as a proofgym in a new pid namespace (with its own /proc), as in a
    container that shares this host's cgroups and temp dir."""
    return subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", source, *args],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
        timeout=60)


def test_an_instance_in_another_pid_namespace_leaves_a_live_runtimes_cgroup_alone():
    require_tool("bwrap")
    require_tool("unshare")
    # no spare: the runtime's cgroup stays empty (what the sweep may remove) until its first call
    rt = SandboxRuntime(limits=FAST_LIMITS, prestart=False)
    try:
        assert rt._cgroup is not None, "as root a runtime has a cgroup"
        other = _other_instance(_OTHER)
        assert "SWEPT" in other.stdout, other
        gone = [str(d) for d in rt._cgroup.dirs if not d.is_dir()]
        assert not gone, f"an instance in another pid namespace removed this runtime's cgroups {gone}"
        r = bash(rt, "echo alive")
        assert r.ok and "alive" in r.output, r
    finally:
        rt.close()


def test_an_instance_in_another_pid_namespace_leaves_a_live_runtimes_scratch_alone(tmp_path):
    require_tool("bwrap")
    require_tool("unshare")
    rt = SandboxRuntime(limits=FAST_LIMITS, prestart=False, scratch_dir=tmp_path)
    try:
        assert "alive" in bash(rt, "echo alive > f && cat f").output
        other = _other_instance(_OTHER_SCRATCH, str(tmp_path))
        assert "SWEPT" in other.stdout, other
        assert rt._root.is_dir() and os.path.ismount(rt._root), \
            f"an instance in another pid namespace removed this runtime's scratch {rt._root}"
        assert (rt.workspace_changes_dir / "f").read_text() == "alive\n"
        r = bash(rt, "cat f")
        assert r.ok and "alive" in r.output, r
    finally:
        rt.close()
