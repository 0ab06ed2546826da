"""Attack: reach the privileged spawner from inside a sandbox.

Every sandbox's ``bwrap`` is forked by a long-lived spawner (root, when proofgym runs as root) or,
from a runtime's second sandbox on, by a per-cgroup helper forked from it, which sits in the
runtime's cgroup beside the agent's processes. The spawner holds its control socket, the reply
socket and a pidfd of every sandbox it started, and the idmapped user namespaces. The agent looks,
in every process it can see, for any descriptor it could use to talk to them: one of their
sockets, a pidfd (signals to a host process), a namespace descriptor (``setns`` out), and for the
spawner or a helper itself (to signal or ``ptrace`` it). Its processes must all be the
unprivileged sandbox user with no capabilities.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from proofgym.runtimes.sandbox import SandboxRuntime, namespaces
from tests.security.conftest import python_inside

pytestmark = pytest.mark.sandbox

_SURVEY = r'''
import os
for pid in sorted(p for p in os.listdir("/proc") if p.isdigit()):
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError as exc:
        print(pid, "unlistable", exc.errno)
        continue
    for name in names:
        try:
            print(pid, name, os.readlink(f"/proc/{pid}/fd/{name}"))
        except OSError:
            pass
'''


def _fd_targets(pid: int) -> set[str]:
    found = set()
    try:
        for name in os.listdir(f"/proc/{pid}/fd"):
            try:
                found.add(os.readlink(f"/proc/{pid}/fd/{name}"))
            except OSError:
                continue
    except OSError:
        return set()
    return found


def _descendants(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            kids = [int(k) for k in (task / "children").read_text().split()]
        except OSError:
            continue
        for kid in kids:
            out += [kid, *_descendants(kid)]
    return out


def test_no_sandbox_process_holds_a_descriptor_of_the_spawner_or_its_helpers(rt: SandboxRuntime):
    rt.reset()
    python_inside(rt, "print('first sandbox')")
    rt.reset()  # the second sandbox of this runtime's cgroup is forked by the per-cgroup helper
    survey = python_inside(rt, _SURVEY)
    assert survey.ok, survey.output
    spawner = namespaces._spawner._proc
    assert spawner is not None and spawner.poll() is None
    # the spawner and its helpers (its forks: the same command line; the bwraps they start and
    # the sandboxes' processes are not)
    privileged = [spawner.pid, *(p for p in _descendants(spawner.pid)
                                 if _cmdline(p) == _cmdline(spawner.pid))]
    if rt._cgroup is not None:  # a helper joins the runtime's cgroup (none without a cgroup)
        assert len(privileged) >= 2, "no per-cgroup helper: the second sandbox was not started by one"
    theirs = {t for pid in privileged for t in _fd_targets(pid)
              if t.startswith(("socket:", "anon_inode:", "pipe:"))}
    inside = [line.split(" ", 2) for line in survey.output.splitlines() if line.count(" ") >= 2]
    targets = {t for _, _, t in inside}
    assert theirs, "the survey found no descriptor of the spawner: it looked in the wrong place"
    assert not targets & theirs, (targets & theirs, survey.output)
    for kind in ("anon_inode:[pidfd]", "mnt:[", "user:[", "pid:[", "net:[", "cgroup:["):
        assert not any(t.startswith(kind) for t in targets), (kind, survey.output)
    # neither the spawner nor a helper is a process the sandbox can name (signal, ptrace): none
    # is in the sandbox's pid namespace
    host_pids = rt._shell._sandbox_processes()  # (host pid, pid inside) of the sandbox's processes
    assert host_pids and not {h for h, _ in host_pids} & set(privileged)


def test_every_process_of_the_second_sandbox_is_unprivileged_and_oom_killable(rt: SandboxRuntime):
    if os.geteuid() != 0:
        pytest.skip("as an ordinary user the sandbox's uid is not host root to begin with")
    rt.reset()
    python_inside(rt, "print('first')")
    rt.reset()
    result = python_inside(rt, "import os, time; print(os.getpid()); time.sleep(0.01)")
    assert result.ok, result.output
    procs = rt._shell._sandbox_processes()
    assert procs
    for host_pid, _ in procs:
        uids = _uids(host_pid)
        if uids is None:  # exited meanwhile
            continue
        assert 0 not in uids, (host_pid, uids)
        assert _cap_eff(host_pid) == 0, host_pid
        # the helper that forked it is exempt from the OOM killer (-1000); a sandbox never is
        assert int(Path(f"/proc/{host_pid}/oom_score_adj").read_text()) >= 0, host_pid


def _cmdline(pid: int) -> bytes | None:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None


def _uids(pid: int) -> list[int] | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    return [int(x) for x in next(ln for ln in status.splitlines() if ln.startswith("Uid:")).split()[1:]]


def _cap_eff(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(ln for ln in status.splitlines() if ln.startswith("CapEff:")).split()[1], 16)
