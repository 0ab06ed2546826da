"""Attack: reach host root from inside the sandbox.

When proofgym runs as root, a sandbox whose user is mapped onto host uid 0 can write every host
interface that only checks the uid: sysctls under ``/proc/sys`` (``kernel.core_pattern`` makes the
kernel run a program of the agent's choosing as host root). Seen from the host, no sandbox process
may be uid 0, and no sysctl write from inside may reach the host.
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from pathlib import Path

import pytest

from tests.security.conftest import as_root, bash, process_uids

pytestmark = pytest.mark.sandbox

# A global (not namespaced), harmless knob: how long the kernel waits for a lease holder.
_SYSCTL = Path("/proc/sys/fs/lease-break-time")
_CORE_PATTERN = Path("/proc/sys/kernel/core_pattern")


def test_sysctl_written_from_inside_does_not_change_the_host(rt):
    before = _SYSCTL.read_text()
    forged = str(int(before) + 17)
    try:
        r = bash(rt, f"echo {forged} > {_SYSCTL}; cat {_SYSCTL}")
        after = _SYSCTL.read_text()
    finally:
        if _SYSCTL.read_text() != before:  # the attack worked: put the host back at once
            _SYSCTL.write_text(before)
    assert after == before, f"the sandbox changed the host's fs.lease-break-time: {r.output}"
    assert forged not in r.output, r.output


def test_core_pattern_is_not_writable_from_inside(rt):
    before = _CORE_PATTERN.read_bytes()
    # a plain file name, never a pipe: even while the attack holds, no program is run
    forged = f"core-proofgym-attack-{secrets.token_hex(4)}"
    try:
        r = bash(rt, f"printf %s {forged} > {_CORE_PATTERN}; echo status=$?; cat {_CORE_PATTERN}")
        after = _CORE_PATTERN.read_bytes()
    finally:
        if _CORE_PATTERN.read_bytes() != before:
            _CORE_PATTERN.write_bytes(before)
    assert after == before, "the sandbox rewrote the host's kernel.core_pattern"
    assert "status=0" not in r.output, r.output


@as_root
def test_no_sandbox_process_is_host_uid_0(rt):
    marker = f"proofgym-attack-marker-{secrets.token_hex(6)}"
    result: dict = {}
    runner = threading.Thread(
        target=lambda: result.setdefault("r", bash(rt, f"(exec -a {marker} sleep 2); echo done")))
    runner.start()
    try:
        pid = None
        deadline = time.monotonic() + 10
        while pid is None and time.monotonic() < deadline:
            for p in filter(str.isdigit, os.listdir("/proc")):
                try:
                    if Path(f"/proc/{p}/cmdline").read_bytes().startswith(marker.encode()):
                        pid = int(p)
                        break
                except OSError:
                    continue
            time.sleep(0.01)
        assert pid is not None, "the marker process never showed up on the host"
        pidns = os.readlink(f"/proc/{pid}/ns/pid")
        inside = {}
        for p in filter(str.isdigit, os.listdir("/proc")):
            try:
                if os.readlink(f"/proc/{p}/ns/pid") == pidns:
                    inside[int(p)] = process_uids(int(p))
            except OSError:
                continue
    finally:
        runner.join()
    assert result["r"].ok and "done" in result["r"].output, result["r"]
    # the sandbox's init, its shell and the command: at least three processes in its namespace
    assert len(inside) >= 3, inside
    root = {p: uids for p, uids in inside.items() if uids is not None and 0 in uids}
    assert not root, f"sandbox processes running as host uid 0 (host pid: uids): {root}"
