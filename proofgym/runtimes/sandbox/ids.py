"""Host identities of concurrent sandboxes: what separates them in the kernel's per-user counters.

The kernel counts some resources per host user: inotify instances and watches, epoll watches,
processes (``RLIMIT_NPROC``), POSIX message-queue bytes, pending signals, keys. Sandboxes that
share a host uid share those pools, and a pool one sandbox fills is a pool another sees full: a
channel (code under test in a grading sandbox signalled hidden tests to a concurrent agent
episode through its count of inotify instances) and a denial of service.

* **As root** every sandbox gets a host uid and gid of its own, leased from a reserved range
  (:func:`id_range`, ``PROOFGYM_SANDBOX_UID``/``PROOFGYM_SANDBOX_GID`` and
  ``PROOFGYM_SANDBOX_ID_COUNT``; default 4096 ids from 2147352576). The range is checked against
  the host's accounts, groups and subordinate-id ranges before first use. A lease is an
  exclusive ``flock`` on a file per id in root's private state (``/var/cache/proofgym/ids``),
  so every proofgym process of the host draws from the same range without a server, and a
  process that dies (even by ``SIGKILL``) releases its leases with its descriptors. The
  sandbox's first process checks, before it drops to the leased uid, that no process of that
  uid is alive
  (``getpriority(PRIO_USER)``) and that the uid holds no kernel keys (``/proc/key-users``, which
  every sandbox's session keyring shows, also across pid namespaces: another proofgym in a
  container on this kernel): a sandbox of a killed run still dying, or a foreign process, makes
  the id skipped, never shared.
* **As an ordinary user** there is one host uid to run as (mapping others needs a setuid helper
  and an idmapped workspace, which an unprivileged user cannot mount). The downgrade: sandboxes
  take a slot (:func:`user_slots`, ``PROOFGYM_SANDBOX_SLOTS``, default 24), and each caps
  inotify and fanotify use in its own user namespace at its slot's share of the user's limits
  (``/proc/sys/user/max_inotify_*`` of the namespace), so the shared pool is never full and no
  sandbox can see another's use of it. The epoll watch pool and ``RLIMIT_NPROC`` cannot be
  split this way: see ``docs/threat-model.md``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
import weakref
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from proofgym.runtimes import program_files
from proofgym.runtimes.private_dirs import state_dir
from proofgym.runtimes.sandbox.system import SandboxSetupError

SANDBOX_UID_ENV, SANDBOX_GID_ENV = "PROOFGYM_SANDBOX_UID", "PROOFGYM_SANDBOX_GID"
SANDBOX_ID_COUNT_ENV = "PROOFGYM_SANDBOX_ID_COUNT"
SANDBOX_SLOTS_ENV = "PROOFGYM_SANDBOX_SLOTS"
DEFAULT_SANDBOX_ID = 0x7FFE0000
DEFAULT_ID_COUNT = 4096
DEFAULT_USER_SLOTS = 24
#: inotify instances and watches left to the user's own processes when sandboxes run as it.
_USER_RESERVE = {"max_inotify_instances": 32, "max_inotify_watches": 8192,
                 "max_fanotify_groups": 32, "max_fanotify_marks": 8192}
_USER_LIMIT_FILES = {"max_inotify_instances": "/proc/sys/fs/inotify/max_user_instances",
                     "max_inotify_watches": "/proc/sys/fs/inotify/max_user_watches",
                     "max_fanotify_groups": "/proc/sys/fs/fanotify/max_user_groups",
                     "max_fanotify_marks": "/proc/sys/fs/fanotify/max_user_marks"}
#: What a sandbox's first process reports when its leased uid has a live process (written once,
#: in the spawner program, which imports nothing of proofgym).
ID_BUSY = program_files.constant("spawner", "ID_BUSY", str)
#: An id found in use by a live process is not tried again for this long; one this process
#: just released, not for a moment (the pid namespace of its sandbox may still be going).
_BUSY_S = 10.0
_COOL_S = 2.0
_WAIT_S = 60.0


@dataclass(frozen=True)
class IdRange:
    """``count`` consecutive uids from ``uid`` and gids from ``gid``."""

    uid: int
    gid: int
    count: int

    def ids(self, index: int) -> tuple[int, int]:
        return self.uid + index, self.gid + index


def _int_env(name: str, default: int, low: int, high: int, what: str) -> int:
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = low - 1
    if not low <= value <= high:
        raise SandboxSetupError(f"{name}={raw!r} is not {what}; unset it for the default "
                                f"{default}")
    return value


@cache
def id_range() -> IdRange:
    """The reserved range sandboxes lease their host ids from when proofgym runs as root."""
    count = _int_env(SANDBOX_ID_COUNT_ENV, DEFAULT_ID_COUNT, 1, 1 << 20,
                     "a number of ids between 1 and 1048576")
    what = f"a usable first id (1 to {0xFFFFFFFE - count}, and not 65535 within the range)"
    uid = _int_env(SANDBOX_UID_ENV, DEFAULT_SANDBOX_ID, 1, 0xFFFFFFFE - count, what)
    gid = _int_env(SANDBOX_GID_ENV, uid, 1, 0xFFFFFFFE - count, what)
    for name, first in ((SANDBOX_UID_ENV, uid), (SANDBOX_GID_ENV, gid)):
        if first <= 65535 < first + count:
            raise SandboxSetupError(f"{name}={first} with {count} ids includes 65535 (the "
                                    f"overflow id); {what}")
    for kind, first, path in (("uid", uid, "/proc/self/uid_map"), ("gid", gid, "/proc/self/gid_map")):
        if not _mapped(path, first, count):
            raise SandboxSetupError(
                f"the sandbox {kind} range {first}-{first + count - 1} is not mapped in this user "
                f"namespace ({path}: a rootless container?): choose a mapped range with "
                f"{SANDBOX_UID_ENV}/{SANDBOX_GID_ENV} and {SANDBOX_ID_COUNT_ENV}, or run proofgym "
                "as an ordinary user")
    taken = _ids_in_use()
    for kind, first, used in (("uid", uid, taken[0]), ("gid", gid, taken[1])):
        clash = sorted(i for i in used if first <= i < first + count)
        if clash:
            raise SandboxSetupError(
                f"the sandbox {kind} range {first}-{first + count - 1} holds {kind} {clash[0]}, "
                f"which this host uses (an account, group or subordinate-id range): choose a free "
                f"range with {SANDBOX_UID_ENV}/{SANDBOX_GID_ENV} and {SANDBOX_ID_COUNT_ENV}")
    return IdRange(uid, gid, count)


def _mapped(path: str, first: int, count: int) -> bool:
    """Whether ids ``first`` to ``first + count - 1`` all exist in this user namespace."""
    try:
        lines = Path(path).read_text().split("\n")
    except OSError:
        return True  # no user namespaces here: every id exists
    ranges = sorted((int(a), int(n)) for a, _b, n in (ln.split() for ln in lines if ln.strip()))
    at = first
    for start, n in ranges:
        if start <= at < start + n:
            at = start + n
        if at >= first + count:
            return True
    return at >= first + count


def _ids_in_use() -> tuple[set[int], set[int]]:
    """Uids and gids of the host's accounts and groups and every id of its subordinate ranges
    (ranges are kept as their two ends and every id between, bounded by the sandbox range's
    size below)."""
    uids: set[int] = set()
    gids: set[int] = set()
    for path, into, field in (("/etc/passwd", uids, 2), ("/etc/passwd", gids, 3),
                              ("/etc/group", gids, 2)):
        with contextlib.suppress(OSError):
            for line in Path(path).read_text(errors="replace").splitlines():
                parts = line.split(":")
                if len(parts) > field and parts[field].isdigit():
                    into.add(int(parts[field]))
    for path, into in (("/etc/subuid", uids), ("/etc/subgid", gids)):
        with contextlib.suppress(OSError):
            for line in Path(path).read_text(errors="replace").splitlines():
                parts = line.split(":")
                if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
                    start, n = int(parts[1]), int(parts[2])
                    into.update(range(start, start + min(n, 1 << 21)))
    return uids, gids


@cache
def _lease_dir(privileged: bool) -> Path:
    """Where lease files live: ``ids/`` of the user's private state (see
    :mod:`proofgym.runtimes.private_dirs`), shared by every proofgym process of this host user
    (as root: ``/var/cache/proofgym/ids``, root's alone)."""
    return state_dir("ids")


class IdLease:
    """A leased sandbox identity: ``uid``/``gid`` (as root), ``slot`` (its index in the range
    or in the user's slots). Held until :meth:`release` (or until this process ends)."""

    def __init__(self, slot: int, fd: int, uid: int | None, gid: int | None) -> None:
        self.slot, self.uid, self.gid = slot, uid, gid
        self._fd = fd
        self._lock = threading.Lock()
        _leases.live.add(self)

    def _forget_after_fork(self) -> None:
        self._lock = threading.Lock()
        fd, self._fd = self._fd, -1
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)

    @property
    def ids(self) -> tuple[int, int] | None:
        return None if self.uid is None or self.gid is None else (self.uid, self.gid)

    def release(self) -> None:
        with self._lock:
            fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)  # the flock goes with its last descriptor
            _leases.forget(self.slot, cool=True)

    def mark_busy(self) -> None:
        """The id is held by a live process outside any lease: skip it for a while."""
        _leases.busy(self.slot)
        self.release()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.release()

    def __repr__(self) -> str:
        return f"IdLease(slot={self.slot}, uid={self.uid}, gid={self.gid})"


class _Leases:
    """This process's view of the lease files: which slots it holds, which it found busy."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: set[int] = set()
        self._busy: dict[int, float] = {}
        self.live: weakref.WeakSet[IdLease] = weakref.WeakSet()
        os.register_at_fork(after_in_child=self._after_fork)

    def _after_fork(self) -> None:
        # a forked child (a pool worker) holds copies of the parent's lease descriptors: it
        # closes them, or the ids would stay locked for the child's lifetime after the parent
        # released them
        self._lock = threading.Lock()
        self._held = set()
        for lease in list(self.live):
            lease._forget_after_fork()
        self.live = weakref.WeakSet()

    def forget(self, slot: int, cool: bool = False) -> None:
        with self._lock:
            self._held.discard(slot)
            if cool and os.geteuid() == 0:  # (the kernel frees a uid's keys just after)
                self._busy[slot] = max(self._busy.get(slot, 0), time.monotonic() + _COOL_S)

    def busy(self, slot: int) -> None:
        with self._lock:
            self._busy[slot] = time.monotonic() + _BUSY_S

    def claim(self, count: int, privileged: bool) -> tuple[int, int] | None:
        """The lowest free slot and its locked descriptor, or ``None`` if all are taken. As
        root a slot whose uid is alive (see :func:`uid_in_use`) is skipped for a while."""
        folder = _lease_dir(privileged)
        now = time.monotonic()
        keyed = _uids_with_keys() if privileged else set()
        for slot in range(count):
            with self._lock:
                if slot in self._held or self._busy.get(slot, 0) > now:
                    continue
                self._held.add(slot)  # reserved while we try its file
            fd = os.open(folder / str(slot), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW,
                         0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                self.forget(slot)
                continue
            if privileged and uid_in_use(id_range().ids(slot)[0], keyed):
                os.close(fd)
                self.forget(slot)
                self.busy(slot)
                continue
            return slot, fd
        return None


def _uids_with_keys() -> set[int]:
    """Uids the kernel holds keys for (``/proc/key-users``: per user namespace, so it also
    shows uids whose processes another pid namespace on this kernel runs)."""
    try:
        text = Path("/proc/key-users").read_text()
    except OSError:
        return set()
    return {int(line.split(":", 1)[0]) for line in text.splitlines()
            if line.split(":", 1)[0].strip().isdigit()}


def uid_in_use(uid: int, keyed: set[int] | None = None) -> bool:
    """Whether a process of ``uid`` lives (in this pid namespace) or the uid holds kernel keys
    (every sandbox's session keyring: also one run by another proofgym in a container on this
    kernel). The sandbox's first process checks it again just before it drops to the uid."""
    if uid in (_uids_with_keys() if keyed is None else keyed):
        return True
    try:
        os.getpriority(os.PRIO_USER, uid)
    except ProcessLookupError:
        return False
    return True


_leases = _Leases()


def lease() -> IdLease:
    """A sandbox identity for one sandbox (see the module's docstring); waits up to a minute
    when every id is taken, then raises :class:`SandboxSetupError` saying what to change."""
    privileged = os.geteuid() == 0
    count = id_range().count if privileged else user_slots()
    deadline = time.monotonic() + _WAIT_S
    while True:
        got = _leases.claim(count, privileged)
        if got is not None:
            slot, fd = got
            if privileged:
                uid, gid = id_range().ids(slot)
                return IdLease(slot, fd, uid, gid)
            return IdLease(slot, fd, None, None)
        if time.monotonic() > deadline:
            more = (f"{SANDBOX_ID_COUNT_ENV} (the range holds {count} ids)" if privileged else
                    f"{SANDBOX_SLOTS_ENV} (now {count}; each slot's share of the user's inotify "
                    "limits shrinks), or run proofgym as root for an id per sandbox")
            raise SandboxSetupError(f"all {count} sandbox ids of this host are in use by running "
                                    f"sandboxes and stayed so for {_WAIT_S:.0f} s: end some runs "
                                    f"or raise {more}")
        time.sleep(0.05)


def user_slots() -> int:
    """How many sandboxes may run at once as this (unprivileged) user."""
    return _int_env(SANDBOX_SLOTS_ENV, DEFAULT_USER_SLOTS, 1, 4096,
                    "a number of concurrent sandboxes between 1 and 4096")


@cache
def user_namespace_caps() -> dict[str, int]:
    """Without root: each sandbox's share of the user's inotify and fanotify limits, written to
    its own user namespace's ``/proc/sys/user`` files (a namespace's use is also charged to the
    user's pool, which the shares together never fill)."""
    slots = user_slots()
    caps = {}
    for name, path in _USER_LIMIT_FILES.items():
        try:
            total = int(Path(path).read_text())
        except (OSError, ValueError):
            continue
        caps[name] = max(0, (total - min(_USER_RESERVE[name], total // 4)) // slots)
    return caps
