"""Host ids of concurrent sandboxes (proofgym/runtimes/sandbox/ids.py): as root a uid and gid
of its own per sandbox, leased across processes from a checked range; without root a slot and
its share of the user's inotify pools."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from proofgym.runtimes import program_files
from proofgym.runtimes.sandbox import SandboxRuntime, SandboxSetupError, ids
from tests.conftest import require_tool
from tests.sandbox_helpers import FAST_LIMITS

pytestmark = pytest.mark.sandbox
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="host uids per sandbox need root")


def _uids(rt: SandboxRuntime) -> tuple[int, int]:
    r = rt.execute("bash", {"command": "true"})
    assert r.ok, r
    lease = rt._shell.proc.lease
    return lease.uid, lease.gid


def test_the_spawner_reports_a_busy_id_in_the_words_the_host_looks_for():
    """The text is written once, in the spawner program, and read from its source."""
    spawner = program_files.source("spawner").decode()
    assert f'ID_BUSY = "{ids.ID_BUSY}"\n' in spawner
    assert spawner.count('raise OSError(f"{ID_BUSY} {uid}') == 2


@root_only
def test_concurrent_sandboxes_run_as_distinct_host_ids_of_the_range():
    require_tool("bwrap")
    rts = [SandboxRuntime(limits=FAST_LIMITS, prestart=False) for _ in range(3)]
    try:
        got = [_uids(rt) for rt in rts]
        first = ids.id_range()
        assert len({u for u, _ in got}) == 3 and len({g for _, g in got}) == 3, got
        assert all(first.uid <= u < first.uid + first.count for u, _ in got), got
        for rt, (uid, _gid) in zip(rts, got, strict=True):
            # the host sees the sandbox's processes as its own uid, and only that one
            pids = [h for h, _inner in rt._shell._sandbox_processes()]
            assert pids
            for pid in pids:
                status = Path(f"/proc/{pid}/status").read_text()
                uid_line = next(line for line in status.splitlines() if line.startswith("Uid:"))
                assert uid_line.split()[1:] == [str(uid)] * 4, (pid, uid_line)
    finally:
        for rt in rts:
            rt.close()


@root_only
def test_a_lease_held_by_another_process_is_never_shared():
    require_tool("bwrap")
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent("""
            import sys, time
            from proofgym.runtimes.sandbox import ids
            held = [ids.lease() for _ in range(4)]
            print(" ".join(str(lease.uid) for lease in held), flush=True)
            sys.stdin.read()
        """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        theirs = {int(u) for u in holder.stdout.readline().split()}
        assert len(theirs) == 4
        with SandboxRuntime(limits=FAST_LIMITS, prestart=False) as rt:
            uid, _ = _uids(rt)
        assert uid not in theirs, (uid, theirs)
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)


@root_only
def test_an_id_with_a_live_process_outside_any_lease_is_skipped():
    """A process of a leased uid that outlived its lease (a killed run's sandbox still dying,
    or a stranger given an id of the range) makes the sandbox take another id."""
    require_tool("bwrap")
    first = ids.id_range()
    squatters = []
    try:
        for k in range(3):  # the lowest ids, which a lease would take first
            uid = first.uid + k
            squatters.append(subprocess.Popen(
                ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "sleep", "60"]))
        time.sleep(0.2)
        with SandboxRuntime(limits=FAST_LIMITS, prestart=False) as rt:
            uid, _ = _uids(rt)
            assert uid >= first.uid + 3, uid
            assert rt.execute("bash", {"command": "echo ok"}).output.strip() == "ok"
    finally:
        for p in squatters:
            p.kill()
            p.wait()


@root_only
def test_a_range_holding_a_host_account_is_refused(monkeypatch):
    uid = int(subprocess.check_output(["id", "-u", "daemon"]).strip())
    monkeypatch.setenv(ids.SANDBOX_UID_ENV, str(uid))
    monkeypatch.setenv(ids.SANDBOX_ID_COUNT_ENV, "4")
    ids.id_range.cache_clear()
    try:
        with pytest.raises(SandboxSetupError, match=f"holds uid {uid}.*choose a free range"):
            ids.id_range()
    finally:
        ids.id_range.cache_clear()


@pytest.mark.parametrize("name,value", [(ids.SANDBOX_UID_ENV, "zero"), (ids.SANDBOX_UID_ENV, "0"),
                                        (ids.SANDBOX_ID_COUNT_ENV, "-3"),
                                        (ids.SANDBOX_UID_ENV, "65534")])
def test_bad_id_settings_say_what_to_set(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    ids.id_range.cache_clear()
    try:
        with pytest.raises(SandboxSetupError, match=f"{name}|65535"):
            ids.id_range()
    finally:
        ids.id_range.cache_clear()


def test_without_root_each_sandbox_gets_a_share_of_the_users_inotify_pool():
    caps = ids.user_namespace_caps()
    total = int(Path("/proc/sys/fs/inotify/max_user_instances").read_text())
    assert 0 < caps["max_inotify_instances"] * ids.user_slots() < total, caps
    watches = int(Path("/proc/sys/fs/inotify/max_user_watches").read_text())
    assert 0 < caps["max_inotify_watches"] * ids.user_slots() < watches, caps


def test_a_forked_child_does_not_keep_its_parents_leases():
    """A pool worker forked while the parent held leases must not lock those ids for its own
    lifetime once the parent releases them."""
    lease = ids.lease()
    r, w = os.pipe()
    up_r, up_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child (its fork handlers have run): says so, holds on until told
        os.close(w)
        os.write(up_w, b"u")
        os.read(r, 1)
        os._exit(0)
    os.close(r)
    os.close(up_w)
    assert os.read(up_r, 1) == b"u"
    os.close(up_r)
    try:
        path = ids._lease_dir(os.geteuid() == 0) / str(lease.slot)
        lease.release()
        fd = os.open(path, os.O_RDWR)
        try:  # free for anyone: the child's copy of the descriptor was closed at the fork
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    finally:
        os.close(w)
        os.waitpid(pid, 0)


def test_a_range_this_user_namespace_does_not_map_is_refused(tmp_path, monkeypatch):
    """Root in a rootless container maps only some ids: a range outside them would fail every
    sandbox with a bare EINVAL from chown; it is refused up front, saying what to set."""
    uid_map = tmp_path / "uid_map"
    uid_map.write_text("         0       1000          1\n         1     100000      65536\n")
    assert ids._mapped(str(uid_map), 10, 100) and ids._mapped(str(uid_map), 0, 5)
    assert not ids._mapped(str(uid_map), ids.DEFAULT_SANDBOX_ID, 16)
    real = ids._mapped
    monkeypatch.setattr(ids, "_mapped", lambda path, first, count: real(str(uid_map), first, count))
    ids.id_range.cache_clear()
    try:
        with pytest.raises(SandboxSetupError, match=r"not mapped in this user namespace.*SANDBOX_UID"):
            ids.id_range()
    finally:
        ids.id_range.cache_clear()
