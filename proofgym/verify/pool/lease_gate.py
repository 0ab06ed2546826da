"""Where a pool's jobs wait for their grading lease (:mod:`proofgym.runtimes.grading_lease`):
before they are handed out, so the wait takes no in-flight slot (jobs of other tasks go on
being graded) and does not count against the job's timeout (the first graded episodes of a
GRPO group wait for the group's last episode, however long it plays).

The pool's process holds the job's grading lease from its first attempt (new episodes of the
key wait from then on) until the job resolves; the grader holds its own lease inside (the
worker's, granted at once beside this one), which alone covers gradings run outside a pool.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable

from proofgym.runtimes.grading_lease import HiddenLease
from proofgym.verify.pool.backend import PoolJob

log = logging.getLogger(__name__)
_POLL_S = 0.02


class LeaseGate:
    """Holds jobs until their grading lease is granted, then hands them to ``ready``."""

    def __init__(self, ready: Callable[[PoolJob], None]) -> None:
        self._ready = ready
        self._lock = threading.Lock()
        self._waiting: list[PoolJob] = []
        self._thread: threading.Thread | None = None
        self._closed = False

    def admit(self, job: PoolJob, key: str) -> None:
        """Pass ``job`` on once no episode of ``key`` is live (at once if none is)."""
        job.lease = HiddenLease(key, "grading")
        if job.lease.poll():
            self._ready(job)
            return
        with self._lock:
            self._waiting.append(job)
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, daemon=True,
                                                name="proofgym-grading-lease")
                self._thread.start()

    def _watch(self) -> None:
        while True:
            with self._lock:
                if self._closed or not self._waiting:
                    self._thread = None
                    return
                waiting = list(self._waiting)
            granted = []
            for job in waiting:
                try:
                    if job.lease.poll():
                        granted.append(job)
                except Exception as exc:  # the lease files failed: the worker's own lease decides
                    log.warning("grading lease for a job failed (%s); the grader waits itself", exc)
                    job.lease.release()
                    granted.append(job)
            with self._lock:
                self._waiting = [j for j in self._waiting if j not in granted]
            for job in granted:
                self._ready(job)
            time.sleep(_POLL_S)

    @property
    def waiting(self) -> int:
        with self._lock:
            return len(self._waiting)

    def close(self) -> list[PoolJob]:
        """Stop waiting; the jobs that still waited (their leases released)."""
        with self._lock:
            self._closed = True
            left, self._waiting = self._waiting, []
        for job in left:
            release(job)
        return left


def release(job: PoolJob) -> None:
    """Let the job's pool-side lease go (it resolved)."""
    lease, job.lease = job.lease, None
    if lease is not None:
        with contextlib.suppress(OSError):
            lease.release()
