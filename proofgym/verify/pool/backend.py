"""The seam between the :class:`~proofgym.verify.pool.VerifierPool` scheduler and its backends.

The scheduler owns the queue, the in-flight limit, de-duplication, deadlines and futures; a
backend only runs jobs somewhere (threads here, worker processes, a Ray cluster) and reports
back. Every backend method marked "lock held" is called with :attr:`Scheduler.lock` held and must
not block; it may return a callable that the scheduler runs *after* releasing the lock (a pipe
write, say).
"""

from __future__ import annotations

import concurrent.futures as cf
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from proofgym.core import Verdict
from proofgym.env import VerificationJob

JobKey = tuple[str, str, str, str, str]


@dataclass(eq=False)
class PoolJob:
    """One submitted job as the scheduler and its backend see it."""

    id: int
    key: JobKey
    payload: bytes | VerificationJob
    timeout_s: float
    future: cf.Future[Verdict]
    solo: bool = False  # run alone (a process backend re-runs jobs that shared a dead worker)
    deadline: float = math.inf
    place: Any = None  # where the backend runs it (its worker), for the backend's own use
    #: When it was handed to its backend (``time.monotonic``; ``None``: still waiting): a
    #: backend that cannot time the job itself books it from here.
    started: float | None = None
    module: str = ""  # the task class's module: a worker imports it before the job's clock starts
    importing: bool = False  # its worker imports ``module`` first (process backend): no clock yet
    lease: Any = None  # its grading lease, held from before it is queued until it resolves


class Scheduler(Protocol):
    """What a backend may call on the scheduler that drives it."""

    lock: threading.Lock
    stats: dict[str, int]

    def finish(self, job_id: int, verdict: Verdict, ran_s: float | None = None) -> None:
        """A job's verdict (call without the lock), with the seconds it ran where it was graded
        (``None``: counted from when it was handed out)."""

    def fail_later(self, job: PoolJob, reason: str) -> None:
        """Lock held: resolve ``job`` as an error verdict (off this thread)."""

    def worker_ready(self) -> None:
        """Lock held: a worker can take jobs now (the first one ends the pool's start-up)."""

    def requeue_solo(self, job: PoolJob) -> None:
        """Lock held: take a running job back and run it again, alone, before waiting jobs."""

    def wake(self) -> None:
        """Make the scheduler look again (a slot freed up, deadlines moved)."""

    @property
    def closed(self) -> bool: ...


class GradingBackend(Protocol):
    """Runs jobs; one instance per pool."""

    name: str

    def encode(self, job: VerificationJob) -> bytes | VerificationJob:
        """What travels to the grader (raises if it cannot travel)."""

    def start(self, job: PoolJob) -> Callable[[], None] | bool:
        """Lock held: start ``job`` and set its ``deadline``. ``False``: no room now (the
        scheduler tries again when woken); ``True`` or a callable (run after the lock): started."""

    def finished(self, job: PoolJob) -> None:
        """Lock held: ``job`` resolved; release what it held."""

    def expired(self, job: PoolJob) -> str:
        """Lock held: ``job`` ran past its deadline and is being failed; stop or abandon it.
        Returns a note for the error message."""

    def close(self) -> None:
        """Stop everything (the scheduler has failed every unresolved job already)."""
