"""Attack (on the host's hygiene): the eval process is SIGKILLed in the middle of a command.

Nothing may outlive it: no mount in the host's mount table, no cgroup, no scratch directory and
no sandbox process, once a later ``SandboxRuntime`` has started (a start-up sweep is a fix). The
episode runs in a child process whose temp dir (``TMPDIR``) is private to this test, so only its
own leftovers are counted, never another run's.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, require_tool

pytestmark = pytest.mark.sandbox

_libc = ctypes.CDLL(None, use_errno=True)
_MNT_DETACH = 2

_EPISODE = r"""
import sys
from proofgym.runtimes.sandbox import SandboxRuntime
rt = SandboxRuntime()
r = rt.execute("bash", {"command": "mkdir -p work && echo data > work/f && echo started"})
assert "started" in r.output, r
print("READY", flush=True)
rt.execute("bash", {"command": "sleep 60"})
"""

_LATER_RUN = r"""
from proofgym.runtimes.sandbox import SandboxRuntime
with SandboxRuntime() as rt:
    result = rt.execute("bash", {"command": "echo ok"})
    assert "ok" in result.output, result  # the whole result, to tell a timeout from a setup error
print("CLOSED", flush=True)
"""


def _mounts_under(root: Path) -> list[str]:
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point == str(root) or point.startswith(f"{root}/"):
            out.append(point)
    return out


def _cgroups_of(pid: int) -> list[Path]:
    found = []
    for base, dirs, _files in os.walk("/sys/fs/cgroup"):
        for d in dirs:
            if d.startswith(f"proofgym-{pid}-"):
                found.append(Path(base) / d)
    return found


def _processes_mentioning(text: str) -> list[int]:
    pids = []
    for p in filter(str.isdigit, os.listdir("/proc")):
        try:
            if text.encode() in Path(f"/proc/{p}/cmdline").read_bytes():
                pids.append(int(p))
        except OSError:
            continue
    return pids


def _scratch(tmpdir: Path) -> list[str]:
    return sorted(p.name for p in tmpdir.iterdir() if p.name.startswith("proofgym-sandbox-"))


def _cleanup(tmpdir: Path, pid: int) -> None:
    """Put the host back whatever the runtime left (the attack may well have succeeded)."""
    for p in _processes_mentioning(str(tmpdir)):
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            continue
    time.sleep(0.2)
    for point in sorted(_mounts_under(tmpdir), key=len, reverse=True):
        _libc.umount2(point.encode(), _MNT_DETACH)
    for cg in _cgroups_of(pid):
        try:
            cg.rmdir()
        except OSError:
            continue
    subprocess.run(["rm", "-rf", "--one-file-system", str(tmpdir)], check=False)


_CLEAN_RUN = r"""
from proofgym.runtimes.sandbox import SandboxRuntime
with SandboxRuntime() as rt:
    for _ in range(3):
        assert "ok" in rt.execute("bash", {"command": "mkdir -p d && echo x > d/f && echo ok"}).output
        rt.reset()
print("CLOSED", flush=True)
"""


def test_a_closed_runtime_leaves_nothing_behind():
    """The baseline the attack above builds on: an orderly ``close()`` removes every episode's
    scratch space (the overlay's work directory included, which the kernel leaves unreadable)."""
    require_tool("bwrap")
    tmpdir = Path(tempfile.mkdtemp(prefix="proofgym-attack-close-"))
    tmpdir.chmod(0o755)
    try:
        env = {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(tmpdir)}
        run = subprocess.run([sys.executable, "-c", _CLEAN_RUN], env=env, capture_output=True,
                             text=True, timeout=300)
        assert "CLOSED" in run.stdout, run.stderr[-2000:]
        assert _scratch(tmpdir) == [] and _mounts_under(tmpdir) == [], (
            f"left behind by an orderly close: {_scratch(tmpdir)} {_mounts_under(tmpdir)}")
    finally:
        subprocess.run(["chmod", "-R", "u+rwx", str(tmpdir)], check=False, capture_output=True)
        _cleanup(tmpdir, -1)


def test_sigkill_mid_command_leaves_nothing_behind():
    require_tool("bwrap")
    # not under pytest's tmp_path: that is private to its owner, and a sandbox that runs as an
    # unprivileged uid must be able to reach the staged system the runtime keeps in TMPDIR
    tmpdir = Path(tempfile.mkdtemp(prefix="proofgym-attack-kill9-"))
    tmpdir.chmod(0o755)
    env = {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(tmpdir)}
    child = subprocess.Popen([sys.executable, "-c", _EPISODE], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line.strip() == "READY", f"the episode did not start: {line!r} {child.stderr.read()}"
        time.sleep(0.3)  # `sleep 60` is running inside
        during = {"mounts": _mounts_under(tmpdir), "scratch": _scratch(tmpdir),
                  "cgroups": _cgroups_of(child.pid)}
        # positive control: the counters see this run's resources while it lives
        assert during["scratch"] or during["mounts"], during
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        time.sleep(0.5)  # --die-with-parent: the sandbox goes with its parent
        later = subprocess.run([sys.executable, "-c", _LATER_RUN], env=env, capture_output=True,
                               text=True, timeout=300)
        assert "CLOSED" in later.stdout, later.stderr[-2000:]
        time.sleep(0.3)
        after = {"mounts": _mounts_under(tmpdir), "scratch": _scratch(tmpdir),
                 "cgroups": [str(c) for c in _cgroups_of(child.pid)],
                 "processes": _processes_mentioning(str(tmpdir))}
        assert after == {"mounts": [], "scratch": [], "cgroups": [], "processes": []}, (
            f"left behind after SIGKILL and a later run: {after}")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        _cleanup(tmpdir, child.pid)
