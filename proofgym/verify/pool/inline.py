"""The ``inline`` backend of the :class:`~proofgym.verify.pool.VerifierPool`: grader threads in
this process (for debugging and for graders that only wait). Timeouts hold (a stuck thread is
abandoned and a fresh one takes its place), but a grader that kills the process kills the caller."""

from __future__ import annotations

import time
from collections.abc import Callable

from proofgym.daemon import DaemonThreads
from proofgym.env import VerificationJob
from proofgym.verify.pool.backend import PoolJob, Scheduler
from proofgym.verify.pool.worker import run_job


class InlineBackend:
    name = "inline"

    def __init__(self, scheduler: Scheduler) -> None:
        self._scheduler = scheduler
        self._threads = DaemonThreads("proofgym-grader")  # a stuck grader keeps its thread
        self._abandoned: set[int] = set()

    def encode(self, job: VerificationJob) -> VerificationJob:
        return job  # runs as it is: no copy needed

    def start(self, job: PoolJob) -> Callable[[], None] | bool:
        job.deadline = time.monotonic() + job.timeout_s
        self._threads.submit(self._run, job)
        return True

    def _run(self, job: PoolJob) -> None:
        started = time.perf_counter()
        verdict = run_job(job.payload)
        ran_s = time.perf_counter() - started
        with self._scheduler.lock:
            if job.id in self._abandoned:  # timed out: its verdict came too late to count
                self._abandoned.discard(job.id)
                return
        self._scheduler.finish(job.id, verdict, ran_s)

    def finished(self, job: PoolJob) -> None:
        return None

    def expired(self, job: PoolJob) -> str:
        self._abandoned.add(job.id)
        return " (its thread was abandoned)"

    def close(self) -> None:
        self._threads.shutdown()
