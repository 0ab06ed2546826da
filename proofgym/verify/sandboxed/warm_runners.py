"""Pre-booted, single-use grading runners: the sandbox boot, the interpreter start and pytest's
import and configuration happen ahead of a grading, off its critical path.

Once a snapshot (with its limits, packages and pytest configuration file: the key) is graded a
second time within :data:`IDLE_S`, each grading over it has a background thread boot a spare for
the next: a *fresh* sandbox whose trusted runner (``proofgym/programs/pytest_runner.py``) has
loaded pytest and waits on a pipe for its one job. Nothing of the job's, or the agent's, has
been in it: a spare differs from a sandbox booted on demand only in when it was booted. Each
runner serves exactly one grading and is then torn down, so no state (a process, a file in
``/tmp``, an import cache, a ``sys.modules`` entry) passes from one grading to the next. Spares
are few (one per snapshot, :data:`MAX_SPARES` per process), expire after a minute unused, and
are torn down at exit. A key graded once boots none: a run over many tasks, each graded once
(an eval with one episode per task), would discard every spare unused, a boot's CPU (about a
quarter of a grading's) thrown away each time; a key graded again (an RL group, validate's
controls, a re-grade) is likely graded more.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import select
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from proofgym.verify.sandboxed.workspace import Booted

#: Spares kept per key (snapshot, limits, packages, configuration file).
SPARES_PER_KEY = 1
#: Spares kept by one process in all (each verifier pool worker has its own); the environment
#: variable ``PROOFGYM_GRADING_SPARES`` overrides it (0: none, every grading boots its own).
MAX_SPARES = 2
#: Seconds a spare may wait unused before it is torn down.
IDLE_S = 60.0
_READY = b"ready\n"
_BOOT_S = 20.0
#: Keys remembered as graded (for "graded again"): the most recent this many.
_RECENT_KEYS = 256


@dataclass
class Runner:
    """A booted runner: ``report_fd`` (read) and ``job_fd`` (write) are the host's pipe ends;
    ``ready`` holds what was already read of the report (``ready\\n`` for a spare)."""

    booted: Booted
    report_fd: int
    job_fd: int
    born: float
    ready: bytes = b""

    def discard(self, *, wait: bool = False, then: Callable[[], None] | None = None) -> None:
        """Close the pipes and tear the sandbox down; ``then`` runs once no process of it is
        left (see :meth:`Booted.close`)."""
        for fd in (self.report_fd, self.job_fd):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.report_fd = self.job_fd = -1
        self.booted.close(wait=wait, then=then)

    def wait_ready(self, timeout_s: float) -> bool:
        """Read the runner's ``ready`` line (a spare is handed out only once it has loaded)."""
        deadline = time.monotonic() + timeout_s
        while len(self.ready) < len(_READY):
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self.report_fd], [], [], remaining)[0]:
                return False
            chunk = os.read(self.report_fd, len(_READY) - len(self.ready))
            if not chunk:
                return False
            self.ready += chunk
        return self.ready == _READY


class WarmRunners:
    """The spares of one process, by key."""

    def __init__(self, max_spares: int | None = None) -> None:
        self.max_spares = max_spares if max_spares is not None else \
            int(os.environ.get("PROOFGYM_GRADING_SPARES", MAX_SPARES))
        self._lock = threading.Lock()
        self._spares: dict[Hashable, list[Runner]] = {}
        self._booting = 0
        self._last_taken: OrderedDict[Hashable, float] = OrderedDict()  # key -> when, oldest first
        self._boot = ThreadPoolExecutor(1, thread_name_prefix="proofgym-grade-boot")
        self._closed = False
        self.last_boot_error: str | None = None
        self.stats = {"warm": 0, "cold": 0, "spares_booted": 0}

    def take(self, key: Hashable, boot: Callable[[], Runner]) -> Runner:
        """A spare for ``key`` if one is ready, else a runner booted now; either way, if ``key``
        was taken before within :data:`IDLE_S`, a spare for its next grading is booted in the
        background."""
        self.sweep()
        evicted = None
        with self._lock:
            now = time.monotonic()
            again = now - self._last_taken.pop(key, -IDLE_S - 1.0) <= IDLE_S
            self._last_taken[key] = now
            if len(self._last_taken) > _RECENT_KEYS:
                self._last_taken.popitem(last=False)
            spares = self._spares.get(key) or []
            runner = spares.pop() if spares else None
            others = [(r.born, k) for k, rs in self._spares.items() if k != key for r in rs]
            wanted = again and len(spares) < SPARES_PER_KEY
            if wanted and self._count() >= self.max_spares and others:
                oldest = min(others, key=lambda o: o[0])[1]  # this key is in use now
                evicted = self._spares[oldest].pop(0)
                if not self._spares[oldest]:
                    del self._spares[oldest]
            room = wanted and not self._closed and self._count() < self.max_spares
            if room:
                self._booting += 1
        if evicted is not None:
            evicted.discard()
        if room:
            self._boot.submit(self._add_spare, key, boot)
        self.stats["warm" if runner is not None else "cold"] += 1
        return runner if runner is not None else boot()

    def _count(self) -> int:
        return sum(map(len, self._spares.values())) + self._booting

    def _add_spare(self, key: Hashable, boot: Callable[[], Runner]) -> None:
        runner = None
        try:
            runner = boot()
            if not runner.wait_ready(_BOOT_S):
                runner.discard()
                runner = None
        except Exception as exc:  # a spare is not needed: the grading that
            self.last_boot_error = repr(exc)  # would have used it boots its own, and raises
            runner = None
        with self._lock:
            self._booting -= 1
            if runner is not None and not self._closed:
                self._spares.setdefault(key, []).append(runner)
                self.stats["spares_booted"] += 1
                runner = None
        if runner is not None:
            runner.discard()

    def sweep(self, *, everything: bool = False, wait: bool = False) -> None:
        """Tear down spares unused for :data:`IDLE_S` (all with ``everything``)."""
        now = time.monotonic()
        with self._lock:
            old = [r for rs in self._spares.values() for r in rs
                   if everything or now - r.born > IDLE_S]
            for key in list(self._spares):
                self._spares[key] = [r for r in self._spares[key] if r not in old]
                if not self._spares[key]:
                    del self._spares[key]
        for runner in old:
            runner.discard(wait=wait)

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._boot.shutdown(wait=True)
        self.sweep(everything=True, wait=True)

    def _forget_in_child(self) -> None:
        """After ``fork``: the spares belong to the parent; the child only drops its copies of
        their descriptors."""
        for runner in [r for rs in self._spares.values() for r in rs]:
            for fd in (runner.report_fd, runner.job_fd):
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._spares = {}
        self._last_taken = OrderedDict()
        self._lock = threading.Lock()
        self._booting = 0
        self._boot = ThreadPoolExecutor(1, thread_name_prefix="proofgym-grade-boot")


WARM = WarmRunners()
atexit.register(WARM.close)
os.register_at_fork(after_in_child=WARM._forget_in_child)


def keep_no_spares() -> None:
    """Pre-boot no grading runners in this process from now on (for processes that end without
    ``atexit``, such as a Ray actor ended by ``ray.kill``: a spare would outlive them with its mounts)."""
    WARM.max_spares = 0
