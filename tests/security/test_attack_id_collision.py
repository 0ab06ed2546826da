"""Attack: two proofgym instances on one kernel lease the same sandbox uid.

As root every concurrent sandbox gets a host uid of its own, leased from a reserved range: the
lease is a lock file in ``/var/cache/proofgym/ids`` and the sandbox's first process checks that
no live process already runs as that uid. Both are scoped to a namespace: the lock files to the
mount namespace (a container's own file system), the liveness check to the pid namespace. Two
proofgym instances in two containers of one host (Docker's default: separate mount and pid
namespaces, one user namespace, so one kernel uid space) each see an empty range, lease its
first id, and their sandboxes share every per-uid kernel counter again: the inotify channel of
issue 20 is back. Simulated here with ``unshare --pid --mount`` and a private ``/tmp`` and lease
directory for the second instance, whose range starts at the first sandbox's uid: it must take
another id of its range (``/proc/key-users``, per user namespace, shows the first sandbox's
keyring).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from proofgym.runtimes.sandbox import SandboxRuntime, ids
from tests.conftest import REPO, require_tool
from tests.security.conftest import python_inside
from tests.security.test_attack_neighbour_channels import _INOTIFY_COUNT, _LIBC, _LIMITS, _count, _holders

pytestmark = [pytest.mark.sandbox,
              pytest.mark.skipif(os.geteuid() != 0, reason="host uids per sandbox need root")]

#: The other instance: a sandbox holding 72 inotify instances until released (SIGUSR1).
_OTHER = textwrap.dedent("""
    import sys
    from proofgym.runtimes.sandbox import SandboxRuntime
    from tests.security.conftest import python_inside
    from tests.security.test_attack_neighbour_channels import _HOLD, _INOTIFY_HOLD, _LIBC, _LIMITS
    rt = SandboxRuntime(limits=_LIMITS, prestart=False)
    try:
        src = _LIBC + _INOTIFY_HOLD.format(n=72) + _HOLD.format(comm=sys.argv[1], hold_s=60)
        print(python_inside(rt, src).output, flush=True)
    finally:
        rt.close()
""")


def _host_id(pid: int, which: str = "Uid") -> int:
    line = next(ln for ln in Path(f"/proc/{pid}/status").read_text().splitlines()
                if ln.startswith(f"{which}:"))
    return int(line.split()[1])


def test_an_instance_in_another_container_does_not_share_a_sandbox_uid():
    require_tool("bwrap")
    require_tool("unshare")
    victim = SandboxRuntime(limits=_LIMITS, prestart=False)
    other = None
    try:
        alone = _count(python_inside(victim, _LIBC + _INOTIFY_COUNT))
        # the victim's host ids; the other instance's range starts there (as a container's default
        # range would, with its lowest id free in its own view)
        inside = [host for host, _ in victim._shell._sandbox_processes()]
        assert inside, "the victim sandbox has no process"
        uid, gid = _host_id(inside[0]), _host_id(inside[0], "Gid")
        comm = f"pg{os.urandom(5).hex()}"
        env = {**os.environ, "PYTHONPATH": str(REPO), "PROOFGYM_SANDBOX_UID": str(uid),
               "PROOFGYM_SANDBOX_GID": str(gid), "PROOFGYM_SANDBOX_ID_COUNT": "4"}
        other = subprocess.Popen(
            ["unshare", "--mount", "--pid", "--fork", "--mount-proc", "--propagation", "private",
             "sh", "-c", 'mount -t tmpfs -o mode=1777 tmpfs /tmp && mount -t tmpfs -o mode=0755 '
             f'tmpfs {ids._lease_dir(True)} && exec "$0" -c "$1" "$2"',
             sys.executable, _OTHER, comm], cwd=REPO, env=env, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 120
        while not _holders(comm) and other.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        pids = _holders(comm)
        assert pids, f"the other instance never held its inotify instances: {other.communicate()}"
        theirs = _host_id(pids[0])
        during = _count(python_inside(victim, _LIBC + _INOTIFY_COUNT))
        os.kill(pids[0], signal.SIGUSR1)
        out, _ = other.communicate(timeout=60)
        assert "HELD 72" in out and "RELEASED" in out, out
    finally:
        if other is not None and other.poll() is None:
            other.kill()
            other.wait()
        victim.close()
    assert theirs != uid, f"the other instance's sandbox ran as this one's uid {uid}"
    assert during == alone, (
        f"a sandbox of another proofgym instance (pid and mount namespaces of its own) ran as the "
        f"same host uid {theirs} (this one: {uid}) and its 72 inotify instances were counted "
        f"here: {alone} creatable alone, {during} next to it")
