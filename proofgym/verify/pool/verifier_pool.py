"""``VerifierPool``: grade episodes out of band, with timeouts and crash isolation.

Jobs are :class:`~proofgym.env.VerificationJob` (task, trace, artifact). This module is the
*scheduler*: the queue, the in-flight limit, per-job deadlines, de-duplication and the futures.
Where jobs run is a *backend* behind a small protocol (:mod:`proofgym.verify.pool.backend`):

* ``process`` (default, :mod:`proofgym.verify.pool.process`): worker processes, each running many
  jobs at once on threads. A grader that raises, hangs past its timeout or kills its process
  (``os._exit``, a segfault) yields ``Verdict(status="error")`` with the reason; the pool replaces
  the worker and the other jobs are unaffected.
* ``ray`` (:mod:`proofgym.verify.pool.ray_backend`): grader actors on a Ray cluster, the ``process``
  backend's semantics (a node that dies takes its jobs' actors with it: they are re-graded).
* ``inline`` (:mod:`proofgym.verify.pool.inline`): threads in this process (for debugging).
  Timeouts still hold (the stuck thread is abandoned), but a grader that kills the process kills
  the caller.

Verdicts are never lent: a submission shares a result only with an *identical* job still in
flight (same contract, task content hash, trace hash, artifact digest and verifier version), and
a job's key is forgotten the moment it resolves, so nothing is cached across submissions and an
error verdict is never reused.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import contextlib
import hashlib
import itertools
import logging
import math
import os
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import orjson

from proofgym.core import ConfigError, Verdict, describe_exception
from proofgym.core.defaults import DEFAULTS, VerifierBackend
from proofgym.core.errors import PoolClosedError as PoolClosedError
from proofgym.env import VerificationJob
from proofgym.verify.pool.backend import GradingBackend, JobKey, PoolJob
from proofgym.verify.pool.inline import InlineBackend
from proofgym.verify.pool.lease_gate import LeaseGate, release
from proofgym.verify.pool.process import ProcessBackend

Backend = VerifierBackend

log = logging.getLogger(__name__)

#: How much longer than a task's own grading timeout the pool waits for its job: a sandboxed
#: grading may overrun its test budget by the sandbox start and the report (CodeRepair: up to
#: 20 s), and that overrun must still end in the task's own scored verdict, not a pool timeout.
GRADING_MARGIN_S = 30.0


#: How the error verdict of a job stopped at its timeout begins (see :func:`timed_out`).
TIMED_OUT = "the grader did not finish within the "


def timed_out(verdict: Verdict) -> bool:
    """Whether ``verdict`` is the error of a job the pool stopped at its timeout."""
    return verdict.status == "error" and (verdict.error or "").startswith(TIMED_OUT)


def job_key(job: VerificationJob, contract_id: str = "") -> JobKey:
    """What makes two jobs the same job: contract, task content, trace, artifact, verifier
    version. Equal keys grade to the same verdict, so only equal keys may share one."""
    trace = hashlib.sha256(orjson.dumps(job.trace.to_list(), default=repr,
                                        option=orjson.OPT_SORT_KEYS)).hexdigest()
    return (str(contract_id), str(job.task.content_hash), trace, job.artifact.digest, job.version)


@contextlib.contextmanager
def pool_for(verifier: str | VerifierPool | None, **options: Any) -> Iterator[VerifierPool]:
    """``verifier`` when it is a pool (the caller's: left open), else a new pool of that backend
    (``"process"``, ``"inline"``, ``"ray"``; ``None``: the default,
    :meth:`~proofgym.core.defaults.RunDefaults.verifier_backend`) with ``options``, closed when
    the block ends."""
    if isinstance(verifier, VerifierPool):
        yield verifier
        return
    pool = VerifierPool(verifier, **options)  # type: ignore[arg-type]
    try:
        yield pool
    finally:
        pool.close()


def job_timeout(job: VerificationJob, timeout_s: float) -> float:
    """The pool's limit for ``job``: always longer than the task's own grading timeout, so the
    task's runner (which turns its own timeout into a *scored* 0) answers first."""
    own = job.task.grading_timeout_s
    if isinstance(own, (int, float)) and own > 0 and own + GRADING_MARGIN_S > timeout_s:
        return float(own) + GRADING_MARGIN_S
    return timeout_s


class VerifierPool:
    """Grades :class:`VerificationJob` s off the generation path.

    Args:
        backend: ``"process"`` (crash-isolated worker processes), ``"ray"`` (grader actors on a
            Ray cluster) or ``"inline"`` (threads here); default:
            :meth:`~proofgym.core.defaults.RunDefaults.verifier_backend`.
        processes: Worker processes (``process`` backend), grader actors (``ray`` backend);
            default: the CPU count.
        max_in_flight: Jobs graded at once, over all workers; the rest wait in order (a job's
            timeout starts when it is handed out). Default: the CPU count, so CPU-bound graders
            (sandboxed tests) do not stretch each other; set it above ``processes`` when graders
            mostly wait (an LLM judge: 2 processes, 64 in flight).
        timeout_s: Default per-job time limit, counted from when the job starts running; a job
            whose task declares a longer ``grading_timeout_s`` gets that plus a margin.
        start_method: multiprocessing start method; ``forkserver`` keeps workers clean of the
            parent's threads and locks.
        ray_address: The Ray cluster (``ray`` backend; default as :func:`ray_cluster.connect`).
        cpus_per_grader: CPUs each Ray grader actor reserves (``ray`` backend).
        boot: Start the workers now, in the background (:meth:`start`), rather than with the
            first job. Default: for the ``process`` backend, whose start-up takes seconds.

    Invariants: every submitted job's future resolves exactly once, with a :class:`Verdict`
    (never an exception); a verdict is ``status="error"`` when grading failed, never a silent 0.
    """

    def __init__(self, backend: Backend | None = None, *, processes: int | None = None,
                 max_in_flight: int | None = None, timeout_s: float = DEFAULTS.grader_timeout_s,
                 start_method: str = "forkserver", preload: Sequence[str] = (),
                 ray_address: str | None = None, cpus_per_grader: float = 0.0,
                 boot: bool | None = None) -> None:
        backend = backend if backend is not None else DEFAULTS.verifier_backend()
        processes = processes if processes is not None else os.cpu_count() or 1
        max_in_flight = max_in_flight if max_in_flight is not None else os.cpu_count() or 1
        if backend not in ("process", "inline", "ray"):
            raise ConfigError(f"unknown verifier backend {backend!r}; use 'process', 'ray' or 'inline'")
        if processes < 1 or max_in_flight < 1 or not timeout_s > 0:
            raise ConfigError(f"the verifier pool needs processes >= 1, max_in_flight >= 1 and a timeout "
                              f"> 0 s (got {processes}, {max_in_flight}, {timeout_s:g} s)")
        self.backend: Backend = backend
        self.processes = processes
        self.max_in_flight = max_in_flight
        self.timeout_s = timeout_s
        # The event loop only ever touches _keys_lock and the inbox, so it never waits on a lock
        # a worker-facing thread holds; `lock` guards the scheduling state of those threads.
        self.lock = threading.Lock()
        self._keys_lock = threading.Lock()
        self._inbox: queue.SimpleQueue[PoolJob | None] = queue.SimpleQueue()
        self._pending: deque[PoolJob] = deque()
        self._running: dict[int, PoolJob] = {}
        # Only jobs in flight: an identical submission joins one; a resolved job's key is dropped.
        self._futures: dict[JobKey, cf.Future[Verdict]] = {}
        self._ids = itertools.count()
        self._started_at: float | None = None  # when the workers were first asked for
        self._closed = False
        self._supervisor: threading.Thread | None = None
        self._gate = LeaseGate(self._queue)
        self._start_asked = False
        self._boot_thread: threading.Thread | None = None
        #: Seconds from the pool's start (:meth:`start`, else its first job) until its first
        #: worker could take a job (``process`` backend; ``None`` until then, or for others).
        self.startup_s: float | None = None
        self.stats = {"submitted": 0, "deduplicated": 0, "graded": 0, "errors": 0, "timeouts": 0,
                      "worker_deaths": 0, "workers_started": 0}
        self._backend: GradingBackend
        if backend == "process":
            self._backend = ProcessBackend(self, processes=processes, max_in_flight=max_in_flight,
                                           start_method=start_method, preload=preload)
        elif backend == "ray":
            from proofgym.verify.pool.ray_backend import RayBackend  # Ray is optional: imported on demand

            self._backend = RayBackend(self, processes=processes, max_in_flight=max_in_flight,
                                       address=ray_address, cpus_per_grader=cpus_per_grader,
                                       preload=preload)
        else:
            self._backend = InlineBackend(self)
        if backend == "process" if boot is None else boot:
            self.start()

    # ------------------------------------------------------------------ public
    def start(self, modules: Sequence[str] = ()) -> None:
        """Start the workers now, in the background, instead of on the first job: the
        ``process`` backend's start-up (a fresh interpreter importing the graders' code, sympy
        alone takes seconds) then overlaps the caller's own start (building envs, the first
        model calls) instead of delaying the first verdict by all of it; a job's booked
        grading time never holds it (:func:`grading_seconds`). ``modules`` are the graders' modules
        (a task class's ``__module__``), imported by every worker before it takes jobs.
        Returns at once; calling it again, or after jobs were submitted, does no harm."""
        add = getattr(self._backend, "add_modules", None)
        if add is not None:
            add(modules)
        with self._keys_lock:
            if self._closed or self._start_asked:
                return
            self._start_asked = True
            self._ensure_supervisor()
        with self.lock:
            if self._started_at is None:
                self._started_at = time.monotonic()
        self._boot_thread = threading.Thread(target=self._boot, name="proofgym-verifier-boot", daemon=True)
        self._boot_thread.start()

    def submit(self, job: VerificationJob, trajectory_id: str, *, timeout_s: float | None = None,
               contract_id: str = "") -> cf.Future[Verdict]:
        """Queue ``job`` and return a future of its :class:`Verdict`.

        An identical job still in flight (see :func:`job_key`) shares its future; once a job has
        resolved, the same job submitted again is graded again. ``trajectory_id`` names the job in
        error messages only.
        """
        if job.verdict is not None:  # settled where the episode ran: no grader, no worker
            future: cf.Future[Verdict] = cf.Future()
            self._resolve_future(future, job.verdict)
            return future
        key = job_key(job, contract_id)
        with self._keys_lock:
            if self._closed:
                raise PoolClosedError("VerifierPool is closed")
            known = self._futures.get(key)
            if known is not None:
                self.stats["deduplicated"] += 1
                return known
            future = cf.Future()
            self._futures[key] = future
            self.stats["submitted"] += 1
        try:
            payload = self._backend.encode(job)
        except Exception as exc:
            self._settle(key, future, Verdict.failed(
                f"verification job for {trajectory_id!r} cannot be pickled ({describe_exception(exc)}); "
                "define the task class at module level, or use the 'inline' verifier backend"))
            return future
        limit = job_timeout(job, self.timeout_s if timeout_s is None else timeout_s)
        pool_job = PoolJob(next(self._ids), key, payload, limit, future,
                           module=type(job.task).__module__)
        try:
            hidden = job.task.hidden_key
        except Exception as exc:  # the grader's own lease still holds; it waits in its worker
            log.warning("no hidden key for %r (%s): its grading waits in its worker", trajectory_id,
                        describe_exception(exc))
            hidden = None
        if hidden:
            self._gate.admit(pool_job, hidden)  # queued once no episode of its task is live
        else:
            self._queue(pool_job)
        return future

    def _queue(self, job: PoolJob) -> None:
        with self._keys_lock:
            closed = self._closed
            if not closed:
                self._ensure_supervisor()
                # Queued under the lock close() takes first, so close() always finds it in the inbox.
                self._inbox.put(job)
        if closed:  # closed while this job was being encoded or waited: answer it, never drop it
            release(job)
            self._settle(job.key, job.future, Verdict.failed("the verifier pool was closed before "
                                                             "this job was graded"))

    async def grade(self, job: VerificationJob, trajectory_id: str, *,
                    timeout_s: float | None = None, contract_id: str = "") -> Verdict:
        """Submit ``job`` and await its verdict."""
        return await asyncio.wrap_future(self.submit(job, trajectory_id, timeout_s=timeout_s,
                                                     contract_id=contract_id))

    async def grade_timed(self, job: VerificationJob, trajectory_id: str, *,
                          timeout_s: float | None = None, contract_id: str = "",
                          ) -> tuple[Verdict, float]:
        """:meth:`grade`, and the seconds the job ran where it was graded: not its wait in the
        queue, nor for a worker to start (see :func:`grading_seconds`)."""
        future = self.submit(job, trajectory_id, timeout_s=timeout_s, contract_id=contract_id)
        verdict = await asyncio.wrap_future(future)
        return verdict, grading_seconds(future)

    def grade_sync(self, job: VerificationJob, trajectory_id: str, *,
                   timeout_s: float | None = None, contract_id: str = "") -> Verdict:
        """Submit ``job`` and wait for its verdict (for synchronous callers)."""
        return self.submit(job, trajectory_id, timeout_s=timeout_s, contract_id=contract_id).result()

    def grade_batch(self, jobs: Sequence[VerificationJob], trajectory_ids: Sequence[str], *,
                    timeout_s: float | None = None, contract_id: str = "") -> list[Verdict]:
        """Submit every job before waiting for any (they grade concurrently, within
        ``max_in_flight``) and return their verdicts in order."""
        futures = [self.submit(job, name, timeout_s=timeout_s, contract_id=contract_id)
                   for job, name in zip(jobs, trajectory_ids, strict=True)]
        return [future.result() for future in futures]

    @property
    def in_flight(self) -> int:
        with self.lock:
            return len(self._running) + len(self._pending)

    @property
    def closed(self) -> bool:
        return self._closed

    def describe(self) -> dict[str, Any]:
        described = {"backend": self.backend,
                     "processes": self.processes if self.backend in ("process", "ray") else 0,
                     "max_in_flight": self.max_in_flight, "timeout_s": self.timeout_s}
        if self.backend == "ray":
            described.update(self._backend.describe())  # type: ignore[attr-defined]
        return described

    def close(self) -> None:
        """Stop the workers. Jobs not yet graded resolve as error verdicts ("pool closed")."""
        with self._keys_lock, self.lock:
            if self._closed:
                return
            self._closed = True
            left = list(self._pending) + list(self._running.values())
            self._pending.clear()
            self._running.clear()
        left += self._gate.close()
        while True:  # jobs submitted but not yet picked up by the supervisor
            try:
                item = self._inbox.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                left.append(item)
        self._wake()  # the supervisor sees _closed and exits
        for job in left:
            release(job)
            self._resolve_future(job.future, Verdict.failed("the verifier pool was closed before "
                                                            "this job was graded"), _ran(job))
        self._backend.close()
        if self._supervisor is not None:
            self._supervisor.join(timeout=2.0)

    def __enter__(self) -> VerifierPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------- the Scheduler side
    def finish(self, job_id: int, verdict: Verdict, ran_s: float | None = None) -> None:
        """A backend's result for a job (ignored when the job already timed out or the pool
        closed), with the seconds it ran in its worker (``None``: since it was handed out)."""
        with self.lock:
            job = self._running.pop(job_id, None)
            if job is None:
                return
            self._backend.finished(job)
            waiting = bool(self._pending)
        if waiting:
            self._wake()  # a slot freed up for a waiting job
        self._resolve(job, verdict, ran_s)

    def fail_later(self, job: PoolJob, reason: str) -> None:
        """Lock held: resolve ``job`` as an error, on another thread (future callbacks may call
        back into the pool)."""
        self._running.pop(job.id, None)
        threading.Thread(target=self._resolve, args=(job, Verdict.failed(reason)), daemon=True).start()

    def worker_ready(self) -> None:
        """Lock held: a worker can take jobs now (the first one ends the pool's start-up)."""
        if self.startup_s is None and self._started_at is not None:
            self.startup_s = time.monotonic() - self._started_at

    def requeue_solo(self, job: PoolJob) -> None:
        """Lock held: run a running job again, alone, before the waiting ones."""
        self._running.pop(job.id, None)
        job.solo, job.place, job.deadline, job.started = True, None, math.inf, None
        self._pending.appendleft(job)

    def wake(self) -> None:
        self._inbox.put(None)

    _wake = wake

    # -------------------------------------------------------------- internals
    def _ensure_supervisor(self) -> None:
        if self._supervisor is None:
            self._supervisor = threading.Thread(target=self._supervise, name="proofgym-verifier-pool",
                                                daemon=True)
            self._supervisor.start()

    def _supervise(self) -> None:
        """Take new jobs, dispatch waiting ones, expire overdue ones: the only thread that starts
        jobs. It sleeps on the inbox until a job arrives, a thread wakes it, or a deadline."""
        timeout: float | None = None
        while True:
            try:
                items = [self._inbox.get(timeout=timeout)]
            except queue.Empty:
                items = []
            while True:
                try:
                    items.append(self._inbox.get_nowait())
                except queue.Empty:
                    break
            sends: list[Callable[[], None]] = []
            with self.lock:
                if self._closed:
                    return
                self._pending.extend(item for item in items if item is not None)
                try:
                    if self._started_at is None and self._pending:
                        self._started_at = time.monotonic()  # the start-up's clock
                    sends = self._dispatch()
                except Exception as exc:  # cannot start a worker: fail what waits, loudly
                    reason = (f"the verifier pool could not start a worker process: "
                              f"{describe_exception(exc)}; scripts that use the process backend "
                              "need an `if __name__ == '__main__':` guard")
                    for job in self._pending:
                        self.fail_later(job, reason)
                    self._pending.clear()
                now = time.monotonic()
                for job in [j for j in self._running.values() if j.deadline <= now]:
                    self._expire(job)
                deadline = min((j.deadline for j in self._running.values()), default=math.inf)
            for send in sends:  # pipe writes happen outside the lock (a full pipe must not stall)
                send()
            timeout = None if deadline == math.inf else max(0.0, deadline - time.monotonic()) + 0.001

    def _boot(self) -> None:
        """:meth:`start`'s thread: the backend's slow part (a process pool's forkserver importing
        the graders' code) runs without the scheduler's lock, so jobs, results and :meth:`close`
        never wait for it; then the workers start (quick by then) under the lock."""
        warm, prestart = getattr(self._backend, "warm", None), getattr(self._backend, "prestart", None)
        try:
            if warm is not None:
                warm()
            with self.lock:
                if not self._closed and prestart is not None:
                    prestart()
        except Exception as exc:  # not fatal: the workers start with the first job, which reports it
            log.warning("the verifier pool could not start its workers ahead of its jobs (%s); they "
                        "start with the first job", describe_exception(exc))

    def _dispatch(self) -> list[Callable[[], None]]:
        """Lock held: hand waiting jobs to the backend, within the in-flight limit."""
        sends = []
        while self._pending and len(self._running) < self.max_in_flight:
            job = self._pending[0]
            started = self._backend.start(job)
            if started is False:
                break
            self._pending.popleft()
            self._running[job.id] = job
            job.started = time.monotonic()
            if callable(started):
                sends.append(started)
        return sends

    def _expire(self, job: PoolJob) -> None:
        """Lock held: the job ran past its timeout."""
        self._running.pop(job.id, None)
        self.stats["timeouts"] += 1
        note = self._backend.expired(job)
        self.fail_later(job, f"{TIMED_OUT}{job.timeout_s:g} s timeout and was stopped{note}")

    def _resolve(self, job: PoolJob, verdict: Verdict, ran_s: float | None = None) -> None:
        release(job)
        with self.lock:
            self.stats["graded"] += 1
            if verdict.status == "error":
                self.stats["errors"] += 1
        self._settle(job.key, job.future, verdict, _ran(job) if ran_s is None else ran_s)

    def _settle(self, key: JobKey, future: cf.Future[Verdict], verdict: Verdict,
                ran_s: float = 0.0) -> None:
        with self._keys_lock:  # forgotten first: a later identical submission is graded anew
            if self._futures.get(key) is future:
                del self._futures[key]
        self._resolve_future(future, verdict, ran_s)

    @staticmethod
    def _resolve_future(future: cf.Future[Verdict], verdict: Verdict, ran_s: float = 0.0) -> None:
        # Resolved already (a closed pool racing a late result): the first answer stands.
        if future.done():
            return
        future.grading_s = ran_s  # type: ignore[attr-defined] # read by grading_seconds()
        with contextlib.suppress(cf.InvalidStateError):
            future.set_result(verdict)


def _ran(job: PoolJob) -> float:
    """Seconds since ``job`` was handed to its backend (0 if it never was)."""
    return 0.0 if job.started is None else max(0.0, time.monotonic() - job.started)


def grading_seconds(future: cf.Future[Verdict]) -> float:
    """How long the job behind a resolved :meth:`VerifierPool.submit` future ran where it was
    graded (the worker's own clock for the ``process`` backend): its time in the queue and any
    wait for the pool's workers to start are left out. 0 for a job that never ran."""
    return float(getattr(future, "grading_s", 0.0))
