"""The spawner: sandboxes start from a small single-threaded process, never from a
``preexec_fn`` of the (threaded) eval process, and what it leaves behind is cleaned up."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from pathlib import Path

import pytest

from proofgym.runtimes.sandbox import SandboxRuntime
from proofgym.runtimes.sandbox.bwrap import Overlay, bwrap_argv, find_bwrap, spawn
from proofgym.runtimes.sandbox.scratch import remove_scratch, scratch_dir
from proofgym.runtimes.sandbox.system import MinimalSystem
from tests.conftest import require_tool
from tests.sandbox_helpers import FAST_LIMITS, sandbox  # noqa: F401 - fixture

pytestmark = pytest.mark.sandbox


def _status(pid: int, key: str) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return line.split(":", 1)[1].strip()
    raise AssertionError(f"no {key} in /proc/{pid}/status")


def test_no_preexec_fn_and_bwrap_comes_from_a_single_threaded_spawner(sandbox, monkeypatch):  # noqa: F811
    """A ``preexec_fn`` runs Python between fork and exec of a threaded process (a lock another
    thread held at the fork stays held in the child). None is used; bwrap's parent is the
    spawner, which has one thread."""
    calls: list[dict] = []
    real = subprocess.Popen.__init__

    def record(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(kwargs)
        real(self, *args, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "__init__", record)
    busy = threading.Event()
    worker = threading.Thread(target=busy.wait, daemon=True)  # this process has threads
    worker.start()
    try:
        r = sandbox.execute("bash", {"command": "echo up"})
        assert r.output.strip() == "up", r
    finally:
        busy.set()
    assert all(kw.get("preexec_fn") is None for kw in calls), calls
    bwrap_pid = sandbox._shell.proc.pid
    parent = int(_status(bwrap_pid, "PPid"))
    assert parent != os.getpid()
    assert "spawner.py" in Path(f"/proc/{parent}/cmdline").read_text() or \
        "spawner.py" in Path(f"/proc/{int(_status(parent, 'PPid'))}/cmdline").read_text()
    assert _status(parent, "Threads") == "1"


def test_a_cgroups_helper_is_gone_after_close(tmp_path):
    """From a runtime's second sandbox on, the spawner starts it from a helper inside the
    runtime's cgroup (no cgroup move per sandbox); ``close()`` ends the helper and removes the
    cgroup."""
    require_tool("bwrap")
    snap = tmp_path / "snap"
    snap.mkdir()
    rt = SandboxRuntime(snap, limits=FAST_LIMITS, prestart=False)
    try:
        for i in range(3):
            rt.reset()
            assert rt.execute("bash", {"command": f"echo {i}"}).output.strip() == str(i)
        cgroup = rt._cgroup
        if cgroup is None:
            assert os.geteuid() != 0  # as root a cgroup is required (see cgroups.create)
            return
        bwrap_pid = rt._shell.proc.pid
        helper = int(_status(bwrap_pid, "PPid"))
        assert helper in cgroup.pids()  # bwrap was born in the cgroup, from the helper
        assert _status(helper, "Threads") == "1"
    finally:
        rt.close()
    assert not Path(f"/proc/{helper}").exists() or _status(helper, "State").startswith("Z")
    assert not any(d.exists() for d in cgroup.dirs)


@pytest.mark.skipif(os.geteuid() != 0, reason="per-cgroup helpers exist where cgroups do: root")
def test_a_helper_that_dies_while_a_request_is_forwarded_to_it_does_not_stop_the_spawner(tmp_path):
    """The spawner handles its events a batch at a time. A request forwarded to a helper that
    just died drops the helper; the helper's hang-up, in the same batch, is then an event of a
    descriptor no longer registered (it crashed the spawner with KeyError, and every sandbox of
    the process with it). Made deterministic by stopping the spawner while both arrive."""
    require_tool("bwrap")
    snap = tmp_path / "snap"
    snap.mkdir()
    rt = SandboxRuntime(snap, limits=FAST_LIMITS, prestart=False)
    try:
        for i in range(2):  # the second sandbox of the runtime's cgroup comes from a helper
            rt.reset()
            assert rt.execute("bash", {"command": f"echo {i}"}).output.strip() == str(i)
        helper = int(_status(rt._shell.proc.pid, "PPid"))
        spawner = int(_status(helper, "PPid"))
        assert "spawner.py" in Path(f"/proc/{spawner}/cmdline").read_text(), "positive control"
        os.kill(spawner, signal.SIGSTOP)
        try:
            os.kill(helper, signal.SIGKILL)
            while not _status(helper, "State").startswith("Z"):
                pass
            rt.reset()  # stops the sandbox: its bwrap's end is in the batch too
            result: list = []
            boot = threading.Thread(target=lambda: result.append(
                rt.execute("bash", {"command": "echo after"})))
            boot.start()
            boot.join(0.5)  # the request is in the spawner's socket, behind the hang-up
        finally:
            os.kill(spawner, signal.SIGCONT)
        boot.join(60)
        assert result and result[0].output.strip() == "after", result
        assert _status(spawner, "State")[0] in "RS", "the spawner died"
    finally:
        rt.close()


def test_spawned_process_has_popens_interface(tmp_path):
    """What callers use of ``subprocess.Popen``: communicate, returncode, wait with a timeout,
    a negative returncode for a signal."""
    require_tool("bwrap")
    snap = tmp_path / "snap"
    snap.mkdir()
    root = scratch_dir("proofgym-spawn-", 64, parent=tmp_path)
    try:
        system = MinimalSystem.default()
        overlay = Overlay.create(snap, root / "a")
        argv = bwrap_argv(find_bwrap(), system, FAST_LIMITS, ["bash", "-c", "echo out; exit 3"],
                          workspace=overlay.merged)
        proc = spawn(argv, overlay=overlay, limits=FAST_LIMITS, cgroup=None,
                     stdin=subprocess.DEVNULL).proc
        out, err = proc.communicate(timeout=60)
        assert (out, err, proc.returncode) == (b"out\n", None, 3)
        overlay = Overlay.create(snap, root / "b")
        argv = bwrap_argv(find_bwrap(), system, FAST_LIMITS, ["sleep", "60"], workspace=overlay.merged)
        proc = spawn(argv, overlay=overlay, limits=FAST_LIMITS, cgroup=None,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL).proc
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=0.2)
        assert proc.poll() is None
        proc.kill()
        assert proc.wait(timeout=30) == -signal.SIGKILL
        proc.kill()  # reaped: a no-op, never a signal to whatever reuses the pid
    finally:
        remove_scratch(root)


def test_a_failed_setup_is_a_clear_error(tmp_path):
    """What the spawner's child could not do comes back as a SandboxSetupError naming it."""
    require_tool("bwrap")
    from proofgym.runtimes.sandbox.system import SandboxSetupError

    not_a_dir = tmp_path / "snapshot-file"
    not_a_dir.write_text("a file where the snapshot directory should be\n")
    root = scratch_dir("proofgym-spawn-", 64, parent=tmp_path)
    try:
        overlay = Overlay.create(not_a_dir, root / "a")
        argv = bwrap_argv(find_bwrap(), MinimalSystem.default(), FAST_LIMITS, ["true"],
                          workspace=overlay.merged)
        with pytest.raises(SandboxSetupError, match="could not prepare the sandbox"):
            spawn(argv, overlay=overlay, limits=FAST_LIMITS, cgroup=None, stdin=subprocess.DEVNULL)
    finally:
        remove_scratch(root)


def test_kill_from_another_thread_ends_a_wait(tmp_path):
    """``wait()`` in one thread, ``kill()`` in another (as Popen allows): the kill is not held
    up by the waiting thread."""
    require_tool("bwrap")
    snap = tmp_path / "snap"
    snap.mkdir()
    root = scratch_dir("proofgym-spawn-", 64, parent=tmp_path)
    try:
        overlay = Overlay.create(snap, root / "a")
        argv = bwrap_argv(find_bwrap(), MinimalSystem.default(), FAST_LIMITS, ["sleep", "60"],
                          workspace=overlay.merged)
        proc = spawn(argv, overlay=overlay, limits=FAST_LIMITS, cgroup=None,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL).proc
        codes: list[int] = []
        waiter = threading.Thread(target=lambda: codes.append(proc.wait(timeout=60)))
        waiter.start()
        killer = threading.Thread(target=proc.kill)
        killer.start()
        killer.join(timeout=30)
        assert not killer.is_alive(), "kill() waited for wait()"
        waiter.join(timeout=30)
        assert codes == [-signal.SIGKILL]
    finally:
        remove_scratch(root)
