"""The sandbox's privileges as the host sees them, and the kernel surface it is shown.

As root, every sandbox process runs as the dedicated unprivileged sandbox user (never host uid
0) with no capabilities; as an ordinary user, as that user. Either way the agent can edit the
task's files (root-owned ones included, as root) without the snapshot changing, files the host
put into the workspace (a grader's artifact) are the agent's own, and the kernel's knobs under
``/proc`` are read-only or masked, ``/sys`` absent.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from proofgym.runtimes.sandbox import SandboxRuntime
from proofgym.runtimes.sandbox.bwrap import (
    PROC_MASKED_DIRS,
    PROC_MASKED_FILES,
    PROC_READ_ONLY,
    Overlay,
    bwrap_argv,
    find_bwrap,
    remove_scratch,
    scratch_dir,
    spawn,
)
from proofgym.runtimes.sandbox.ids import id_range
from proofgym.runtimes.sandbox.system import MinimalSystem
from tests.conftest import require_tool
from tests.sandbox_helpers import FAST_LIMITS
from tests.security.conftest import bash, process_uids

pytestmark = pytest.mark.sandbox


def _expected_uid(proc) -> int:
    """As root: the uid leased for this sandbox alone (within the reserved range); otherwise
    the user's own."""
    if os.geteuid() != 0:
        return os.getuid()
    lease = proc.lease
    ids = id_range()
    assert ids.uid <= lease.uid < ids.uid + ids.count and lease.gid - ids.gid == lease.uid - ids.uid
    return lease.uid


def _sandbox_pids(rt: SandboxRuntime) -> list[int]:
    shell = rt._shell
    assert shell is not None
    outer = shell.proc.pid
    pids = [outer]
    pids += [host for host, _inner in shell._sandbox_processes()]
    return pids


def _capabilities(pid: int) -> dict[str, int]:
    caps = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("CapInh", "CapPrm", "CapEff", "CapAmb")):
            key, value = line.split(":")
            caps[key] = int(value, 16)
    return caps


def test_every_sandbox_process_runs_as_the_sandbox_user_without_capabilities(tmp_path):
    require_tool("bwrap")
    snap = tmp_path / "snap"
    snap.mkdir()
    with SandboxRuntime(snap, limits=FAST_LIMITS) as rt:
        r = bash(rt, "sleep 2 & sleep 0.3; echo started")
        assert "started" in r.output, r.output
        rt._shell.kill_commands()  # leave only bwrap, its init and the shell
        r = bash(rt, "(sleep 1; true) & echo $!; wait")
        pids = _sandbox_pids(rt)
        # bwrap and the sandbox's init (the supervisor); the next call's shell too, once started
        assert len(pids) >= 2, pids
        uids = {pid: process_uids(pid) for pid in pids}
        want = _expected_uid(rt._shell.proc)
        assert all(u == [want] * 4 for u in uids.values() if u is not None), uids
        if os.geteuid() == 0:
            assert all(0 not in u for u in uids.values() if u is not None), uids
        assert all(_capabilities(pid).get("CapEff") == 0 for pid in pids if Path(f"/proc/{pid}").exists())


def test_a_root_owned_snapshot_is_editable_and_never_written(tmp_path):
    require_tool("bwrap")
    snap = tmp_path / "snap"
    (snap / "pkg").mkdir(parents=True)
    (snap / "pkg" / "mod.py").write_text("A = 1\n")
    os.chmod(snap / "pkg" / "mod.py", 0o644)
    owner = (snap / "pkg" / "mod.py").stat().st_uid
    with SandboxRuntime(snap, limits=FAST_LIMITS, prestart=False) as rt:
        r = bash(rt, "echo 'A = 2' > pkg/mod.py && mkdir pkg/new && echo x > pkg/new/f && "
                     "chmod 600 pkg/mod.py && cat pkg/mod.py && id -u")
        assert r.output.splitlines() == ["A = 2", "1000"], r.output
        upper = rt.workspace_changes_dir
        for rel in ("pkg/mod.py", "pkg/new/f", "pkg/new"):
            assert (upper / rel).stat().st_uid == _expected_uid(rt._shell.proc), rel
        assert rt.snapshot().files == {"pkg/mod.py": b"A = 2\n", "pkg/new/f": b"x\n"}
    assert (snap / "pkg" / "mod.py").read_text() == "A = 1\n"
    st = (snap / "pkg" / "mod.py").stat()
    assert (st.st_uid, st.st_mode & 0o777) == (owner, 0o644)
    assert not (snap / "pkg" / "new").exists()


def test_files_the_host_puts_into_the_workspace_belong_to_the_agent(tmp_path):
    """What a grader writes into the upper directory before the sandbox starts (as root: root's
    files) can be changed inside, as before the privilege drop."""
    require_tool("bwrap")
    snap = tmp_path / "snap"
    snap.mkdir()
    root = scratch_dir("proofgym-grade-", 64, parent=tmp_path)
    try:
        overlay = Overlay.create(snap, root / "ep")
        (overlay.upper / "tests").mkdir()
        (overlay.upper / "tests" / "test_x.py").write_text("planted\n")
        argv = bwrap_argv(find_bwrap(), MinimalSystem.default(), FAST_LIMITS,
                          ["bash", "-c", "echo more >> tests/test_x.py && touch tests/new && "
                                         "cat tests/test_x.py"], workspace=overlay.merged)
        spawned = spawn(argv, overlay=overlay, limits=FAST_LIMITS, cgroup=None,
                        stdin=subprocess.DEVNULL)
        out, _ = spawned.proc.communicate(timeout=60)
        assert spawned.proc.returncode == 0, out
        assert out.decode().splitlines() == ["planted", "more"]
        assert (overlay.upper / "tests" / "new").stat().st_uid == _expected_uid(spawned.proc)
    finally:
        remove_scratch(root)


def test_kernel_knobs_are_read_only_or_masked_and_sys_is_absent(rt):
    r = bash(rt, "for f in /proc/sys/kernel/core_pattern /proc/sys/fs/lease-break-time; do "
                 "(echo 1 > $f) 2>&1 | grep -c 'Read-only file system'; done; "
                 "ls -d /sys 2>&1 | grep -c 'No such file'")
    assert r.output.split() == ["1", "1", "1"], r.output
    # mount point and options only: the whole table is longer than a command's output limit
    mounts = bash(rt, "awk '{print $5, $6}' /proc/self/mountinfo").output.splitlines()
    by_point = {ln.split()[0]: " " + ln.split()[1] + "," for ln in mounts if len(ln.split()) == 2}
    for name in PROC_READ_ONLY:
        if os.path.exists(f"/proc/{name}"):
            assert f"/proc/{name}" in by_point and " ro," in by_point[f"/proc/{name}"], name
    for name in PROC_MASKED_FILES:
        if os.path.exists(f"/proc/{name}"):
            # /dev/null on a nodev mount: nothing to read (an error or an empty file)
            assert bash(rt, f"cat /proc/{name} 2>/dev/null | wc -c").output.strip() == "0", name
            assert f"/proc/{name}" in by_point, name
    for name in PROC_MASKED_DIRS:
        if os.path.isdir(f"/proc/{name}"):
            assert bash(rt, f"ls -A /proc/{name} | wc -l").output.strip() == "0", name
            assert " ro," in by_point[f"/proc/{name}"], name
