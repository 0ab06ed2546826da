"""The ``inline`` backend of the :class:`~proofgym.verify.pool.VerifierPool`: grader threads in
this process (for debugging and for graders that only wait). Timeouts hold (a stuck thread is
abandoned and a fresh one takes its place), but a grader that kills the process kills the caller."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable

from proofgym.env import VerificationJob
from proofgym.verify.pool.backend import PoolJob, Scheduler
from proofgym.verify.pool.worker import run_job


class InlineBackend:
    name = "inline"

    def __init__(self, scheduler: Scheduler) -> None:
        self._scheduler = scheduler
        self._jobs: queue.SimpleQueue[PoolJob | None] = queue.SimpleQueue()
        self._idle = 0  # grader threads waiting for a job
        self._abandoned: set[int] = set()

    def encode(self, job: VerificationJob) -> VerificationJob:
        return job  # runs as it is: no copy needed

    def start(self, job: PoolJob) -> Callable[[], None] | bool:
        job.deadline = time.monotonic() + job.timeout_s
        if self._idle == 0:  # started on demand, then reused
            self._idle += 1
            threading.Thread(target=self._work, name="proofgym-grader", daemon=True).start()
        self._idle -= 1
        self._jobs.put(job)
        return True

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            started = time.perf_counter()
            verdict = run_job(job.payload)
            ran_s = time.perf_counter() - started
            with self._scheduler.lock:
                if job.id in self._abandoned:
                    self._abandoned.discard(job.id)
                    return  # timed out: this thread was written off and replaced; let it end
                self._idle += 1
            self._scheduler.finish(job.id, verdict, ran_s)

    def finished(self, job: PoolJob) -> None:
        return None

    def expired(self, job: PoolJob) -> str:
        self._abandoned.add(job.id)
        return " (its thread was abandoned)"

    def close(self) -> None:
        for _ in range(max(self._idle, 0)):
            self._jobs.put(None)
