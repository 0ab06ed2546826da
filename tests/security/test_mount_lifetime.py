"""Nothing of a sandbox outlives the process that owns it.

A sandbox's mounts live in a mount namespace of its own (they go with its last process); what
is left in the host's view, the scratch directory (a tmpfs as root), is named with the owner's
pid (and its pid namespace) and removed by the next run in that namespace that creates scratch
space in the same place. The runtime's
case is the attack suite's (``test_attack_kill9_leftovers.py``); here: the sweep itself, and a
grading run killed with SIGKILL halfway through its tests.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from proofgym.runtimes.sandbox import SandboxRuntime
from proofgym.runtimes.sandbox.bwrap import remove_scratch, scratch_dir, sweep_scratch
from proofgym.runtimes.sandbox.scratch import pid_namespace
from tests.conftest import REPO, require_tool
from tests.sandbox_helpers import FAST_LIMITS

pytestmark = pytest.mark.sandbox


def _mounts_under(root: Path) -> list[str]:
    points = [ln.split()[4] for ln in Path("/proc/self/mountinfo").read_text().splitlines()]
    return [p for p in points if p == str(root) or p.startswith(f"{root}/")]


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_scratch_of_a_dead_owner_is_swept_and_a_live_owners_is_kept(tmp_path):
    ns, gone = pid_namespace(), _dead_pid()
    dead = tmp_path / f"proofgym-sandbox-{gone}-{ns}-abc"
    alive = tmp_path / f"proofgym-grade-{os.getppid()}-{ns}-def"
    system = tmp_path / "proofgym-system-1234-ffff"  # the shared minimal system: never swept
    # another pid namespace's (its pid cannot be checked here), and an older proofgym's name
    foreign = tmp_path / f"proofgym-sandbox-{gone}-{ns + 1}-ghi"
    unnamed = tmp_path / f"proofgym-sandbox-{gone}-jkl"
    for d in (dead, alive, system, foreign, unnamed):
        (d / "ep0" / "upper").mkdir(parents=True)
        (d / "ep0" / "upper" / "f").write_text("x")
    (dead / "ep0" / "work" / "work").mkdir(parents=True)
    os.chmod(dead / "ep0" / "work" / "work", 0)  # as overlayfs leaves it
    if os.geteuid() == 0:
        subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(dead)], check=True)
        (dead / "inside").write_text("on the tmpfs")
    assert sweep_scratch(tmp_path) == [dead]
    assert not dead.exists() and alive.exists() and system.exists()
    assert foreign.exists() and unnamed.exists()
    assert _mounts_under(tmp_path) == []


def test_new_scratch_space_sweeps_its_parent_first(tmp_path):
    leftover = tmp_path / f"proofgym-sandbox-{_dead_pid()}-{pid_namespace()}-xyz"
    leftover.mkdir()
    root = scratch_dir("proofgym-sandbox-", 16, parent=tmp_path)
    try:
        assert root.name.startswith(f"proofgym-sandbox-{os.getpid()}-{pid_namespace()}-")
        assert not leftover.exists()
    finally:
        remove_scratch(root)


def test_no_sandbox_mount_enters_the_hosts_mount_table(tmp_path):
    require_tool("bwrap")
    snap = tmp_path / "snap"
    snap.mkdir()
    with SandboxRuntime(snap, limits=FAST_LIMITS, scratch_dir=tmp_path) as rt:
        assert bash_ok(rt)
        [root] = [p for p in tmp_path.iterdir() if p.name.startswith("proofgym-sandbox-")]
        expected = [str(root)] if os.geteuid() == 0 else []  # the scratch tmpfs, nothing else
        assert _mounts_under(tmp_path) == expected
        overlays = [ln for ln in Path("/proc/self/mountinfo").read_text().splitlines()
                    if " - overlay " in ln and str(tmp_path) in ln]
        assert overlays == []
    assert _mounts_under(tmp_path) == []


def bash_ok(rt: SandboxRuntime) -> bool:
    return rt.execute("bash", {"command": "echo ok > f && cat f"}).output == "ok"


_GRADING = r"""
import sys, pathlib
from proofgym.verify.sandboxed import run_tests_isolated
snap = pathlib.Path(sys.argv[1])
print("GRADING", flush=True)
run_tests_isolated(snap, {"test_slow.py": b"import time\ndef test_slow():\n    time.sleep(60)\n"},
                   tests=["test_slow.py"], timeout_s=120)
"""

_LATER = r"""
import sys, pathlib
from proofgym.verify.sandboxed import run_tests_isolated
snap = pathlib.Path(sys.argv[1])
run = run_tests_isolated(snap, {"test_ok.py": b"def test_ok():\n    pass\n"}, tests=["test_ok.py"])
print("DONE", run.results, flush=True)
"""


def _processes_of(tmpdir: Path) -> list[int]:
    found = []
    for p in filter(str.isdigit, os.listdir("/proc")):
        try:
            if str(tmpdir).encode() in Path(f"/proc/{p}/cmdline").read_bytes():
                found.append(int(p))
        except OSError:
            continue
    return found


def _cgroups_of(pid: int) -> list[str]:
    return [os.path.join(base, d) for base, dirs, _ in os.walk("/sys/fs/cgroup")
            for d in dirs if d.startswith(f"proofgym-{pid}-")]


def test_a_grading_run_killed_mid_test_leaves_nothing_after_the_next_run(tmp_path):
    require_tool("bwrap")
    snap = tmp_path / "snap"
    snap.mkdir()
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(tmpdir)}
    child = subprocess.Popen([sys.executable, "-c", _GRADING, str(snap)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "GRADING"
        deadline = time.monotonic() + 60
        while not any(p.name.startswith("proofgym-grade-") for p in tmpdir.iterdir()):
            assert time.monotonic() < deadline and child.poll() is None, child.stderr.read()
            time.sleep(0.05)
        time.sleep(1.5)  # pytest is running the slow test inside
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        time.sleep(0.5)
        later = subprocess.run([sys.executable, "-c", _LATER, str(snap)], env=env,
                               capture_output=True, text=True, timeout=300)
        assert "DONE {'test_ok.py::test_ok': 'passed'}" in later.stdout, later.stderr[-2000:]
        time.sleep(0.5)  # the later run tidies up in the background
        after = {"mounts": _mounts_under(tmpdir),
                 "scratch": [p.name for p in tmpdir.iterdir() if p.name.startswith("proofgym-grade-")],
                 "cgroups": _cgroups_of(child.pid), "processes": _processes_of(tmpdir)}
        assert after == {"mounts": [], "scratch": [], "cgroups": [], "processes": []}, after
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
