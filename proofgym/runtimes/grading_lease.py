"""The grading lease: a grading never runs on a kernel where an episode that could profit from
its hidden material is live.

Two sandboxes on one kernel share more than any list of inodes can close: a futex on a page
both map (an unchanged file of the snapshot) carries bits with no error, and so does any page
of the page cache they share. So gradings and episodes are ordered in time instead, per
*hidden key*: a digest of the material a grading holds that an episode must never see
(:func:`hidden_key_of`: the task's hidden files; tasks whose hidden files are identical share
the key, so one task's grading also waits for the other's episodes).

* An **episode** of a task holds an episode lease on its key (:func:`episode_lease`) from before
  its agent's first process runs until every process of its sandbox is gone (the artifact frozen,
  the episode reset or its runtime closed). Episodes of one key share it.
* A **grading** holds a grading lease on the key (:func:`grading_lease`) from before the hidden
  tests enter its sandbox until that sandbox is gone. Gradings of one key share it; a grading
  waits until no episode of its key is live.
* **Fairness**: a grading that waits already holds its share, and a new episode of that key waits
  to start until every grading of the key (running or waiting) has ended, so a stream of episodes
  cannot starve a grading (a GRPO group's gradings run once its episodes have ended). A stream of
  gradings can delay new episodes of their key, but gradings come from ended episodes, so the
  stream ends. Episodes and gradings of other keys never wait for each other.
* **No deadlock**: the one exception to fairness is a process that holds a live episode of the
  key: its next episode of the key starts at once (no grading of the key can be running then).
  Its live episode may end only after that next one starts (a trainer resetting a group's
  environments one after another), so waiting there would wait for ever on a grading that waits
  for it. A grading then waits until that process has no episode of the key left.

The leases are ``flock`` locks on two files per key in a directory of the running user
(:func:`lease_dir`), so they hold across every proofgym process of the host user (``eval``,
``serve``, TRL, Ray workers on this node) without a server, and the kernel releases a dead
process's leases with its descriptors. Per key: ``K.gr`` (every grading holds it shared; an
episode takes it exclusive for a moment, which succeeds only when no grading holds or waits) and
``K.ep`` (every episode holds it shared; a grading takes it exclusive for a moment, which
succeeds only when no episode is live). An episode takes ``K.ep`` before it lets go of ``K.gr``,
so no grading can slip between the two.

Waits poll (non-blocking ``flock``), so they have a deadline and a clear error instead of a hang.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import threading
import time
import weakref
from collections.abc import Mapping
from functools import cache
from pathlib import Path

from proofgym.core.errors import ConfigError
from proofgym.core.errors import LeaseTimeout as LeaseTimeout
from proofgym.runtimes.private_dirs import state_dir

#: How long a lease waits before it raises :class:`LeaseTimeout` (a grading of a key may wait
#: for a long LLM episode; an episode for every grading of its key).
WAIT_S = 3600.0
_POLL_S = (0.005, 0.1)  # the first and the longest sleep between attempts
#: Bench-only, UNSAFE: set to ``1`` only by ``bench/grading_lease.py`` to measure what the lease
#: costs. With it, gradings run while episodes of their task are live: hidden tests can leak.
UNSAFE_DISABLE_ENV = "PROOFGYM_UNSAFE_BENCH_NO_GRADING_LEASE"


def hidden_key_of(hidden: Mapping[str, bytes], snapshot: str | Path) -> str:
    """The hidden key of a grading that adds ``hidden`` (workspace-relative path -> content) to
    ``snapshot``: the digest of the hidden files (tasks with identical hidden files share it);
    with no hidden file, of the snapshot's resolved path (the grading's mutants are drawn from
    tests the episode may see, and fixed per task)."""
    digest = hashlib.sha256(b"proofgym-hidden-key-1\0")
    if hidden:
        for path, content in sorted(hidden.items()):
            digest.update(path.encode("utf-8", "surrogateescape") + b"\0")
            digest.update(hashlib.sha256(bytes(content)).digest())
    else:
        digest.update(b"snapshot\0" + os.fsencode(Path(snapshot).resolve()))
    return digest.hexdigest()[:32]


@cache
def lease_dir() -> Path:
    """Where the lease files live: ``grading/`` of the user's private state (see
    :mod:`proofgym.runtimes.private_dirs`; as root ``/var/cache/proofgym/grading``), shared by
    all the user's proofgym processes. The one place that names it."""
    return state_dir("grading")


def _disabled() -> bool:
    return os.environ.get(UNSAFE_DISABLE_ENV) == "1"


def _open(key: str, suffix: str) -> int:
    if not key or not all(c in "0123456789abcdef" for c in key):
        raise ConfigError(f"a hidden key is a lowercase hex digest (hidden_key_of); got {key!r}")
    return os.open(lease_dir() / f"{key}.{suffix}",
                   os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)


def _try(fd: int, how: int) -> bool:
    try:
        fcntl.flock(fd, how | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


class HiddenLease:
    """An episode's or a grading's lease on one hidden key, held from when :meth:`poll` first
    returns ``True`` until :meth:`release` (or until this process ends). A grading's lease
    holds its share from its first :meth:`poll` on: from then new episodes of the key wait."""

    def __init__(self, key: str, kind: str) -> None:
        if kind not in ("episode", "grading"):
            raise ConfigError(f"kind is 'episode' or 'grading', not {kind!r}")
        self.key, self.kind = key, kind
        self.granted = False
        self._fd = -1
        self._shared = False  # a grading's share of K.gr, held from its first poll
        self._lock = threading.Lock()
        if _disabled():
            self.granted = True
            return
        if kind == "grading":
            self._fd = _open(key, "gr")
            _LIVE.add(self)

    def poll(self) -> bool:
        """Try once, without waiting: ``True`` once the lease is held."""
        with self._lock:
            if self.granted:
                return True
            if self.kind == "grading":
                if self._fd < 0:
                    raise LeaseTimeout("this grading lease was released")
                # its share first (it may fail for the moment an episode checks the file)
                if not self._shared:
                    self._shared = _try(self._fd, fcntl.LOCK_SH)
                    if not self._shared:
                        return False
                ep = _open(self.key, "ep")
                try:
                    self.granted = _try(ep, fcntl.LOCK_EX)  # no episode of the key is live
                finally:
                    os.close(ep)
                return self.granted
            with _HELD_LOCK:
                if _HELD.get(self.key):
                    # this process holds a live episode of the key: no grading of it runs
                    # (one would have needed that episode gone), and one that waits keeps
                    # waiting for this one too. Waiting for it here could deadlock: the
                    # live episode may end only after this one starts (a trainer's resets)
                    ep = _open(self.key, "ep")
                    # counted after the share is taken: a lease the garbage collector releases
                    # meanwhile (in this thread: the lock is reentrant) may have been the last
                    if _try(ep, fcntl.LOCK_SH) and _HELD.get(self.key):
                        return self._grant(ep)
                    os.close(ep)
                    return False
                gr = _open(self.key, "gr")
                try:
                    if not _try(gr, fcntl.LOCK_EX):  # a grading holds or waits
                        return False
                    ep = _open(self.key, "ep")
                    if not _try(ep, fcntl.LOCK_SH):  # a grading checking this very moment
                        os.close(ep)
                        return False
                    return self._grant(ep)  # K.ep held before the exclusive hold on K.gr goes
                finally:
                    os.close(gr)

    def _grant(self, ep: int) -> bool:
        """An episode's grant (``self._lock`` and ``_HELD_LOCK`` held)."""
        self._fd = ep
        self.granted = True
        _HELD[self.key] = _HELD.get(self.key, 0) + 1
        _LIVE.add(self)
        return True

    def wait(self, timeout_s: float = WAIT_S) -> HiddenLease:
        """:meth:`poll` until granted; :class:`LeaseTimeout` after ``timeout_s`` (the lease is
        then released)."""
        deadline = time.monotonic() + timeout_s
        pause = _POLL_S[0]
        while not self.poll():
            if time.monotonic() > deadline:
                self.release()
                other = "an episode" if self.kind == "grading" else "a grading"
                raise LeaseTimeout(
                    f"a {self.kind} of hidden key {self.key} waited {timeout_s:g} s for {other} "
                    f"of the same key to end (lease files in {lease_dir()}): a stuck run on this "
                    f"host, or a wait in the thread that would end it")
            time.sleep(pause)
            pause = min(pause * 2, _POLL_S[1])
        return self

    def release(self) -> None:
        """Let the lease go (idempotent, any thread)."""
        with self._lock:
            fd, self._fd = self._fd, -1
            episode = self.granted and self.kind == "episode"
            self.granted = False
            if fd >= 0 and episode:
                # counted down and closed at once, so no episode of this process starts on the
                # strength of one that is already gone
                with _HELD_LOCK:
                    _HELD[self.key] -= 1
                    if not _HELD[self.key]:
                        del _HELD[self.key]
                    os.close(fd)
                return
        if fd >= 0:
            os.close(fd)  # the flock goes with its last descriptor

    def _forget_after_fork(self) -> None:
        # a forked child holds copies of the parent's descriptors: it drops them, or the parent's
        # release would not end the lease while the child lives
        self._lock = threading.Lock()
        fd, self._fd = self._fd, -1
        self.granted = False
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)

    def __enter__(self) -> HiddenLease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.release()

    def __repr__(self) -> str:
        return f"HiddenLease({self.kind}, {self.key}, granted={self.granted})"


_LIVE: weakref.WeakSet[HiddenLease] = weakref.WeakSet()
#: granted episode leases of this process, per key (reentrant: ``__del__`` releases)
_HELD: dict[str, int] = {}
_HELD_LOCK = threading.RLock()


def _after_fork() -> None:
    global _LIVE, _HELD, _HELD_LOCK
    for lease in list(_LIVE):
        lease._forget_after_fork()
    _LIVE = weakref.WeakSet()
    _HELD, _HELD_LOCK = {}, threading.RLock()


os.register_at_fork(after_in_child=_after_fork)


def episode_lease(key: str, *, timeout_s: float = WAIT_S) -> HiddenLease:
    """An episode's lease on ``key``: waits while a grading of ``key`` runs or waits."""
    return HiddenLease(key, "episode").wait(timeout_s)


def grading_lease(key: str, *, timeout_s: float = WAIT_S) -> HiddenLease:
    """A grading's lease on ``key``: waits until no episode of ``key`` is live on this host (new
    ones wait from the first attempt on)."""
    return HiddenLease(key, "grading").wait(timeout_s)
