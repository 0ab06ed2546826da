"""``VerifierPool``: grade episodes out of band, with timeouts and crash isolation.

Jobs are :class:`~proofgym.env.VerificationJob` (task, trace, artifact). Two backends:

* ``process`` (default): a few worker processes, each running many jobs at once on threads
  (graders mostly *wait*: a remote test runner, an LLM judge), so jobs in flight are set apart
  from processes. A grader that raises, hangs past its timeout or kills its process (``os._exit``,
  a segfault) yields ``Verdict(status="error")`` with the reason; the pool replaces the worker and
  the other jobs are unaffected.
* ``inline``: threads in this process (for debugging). Timeouts still hold (the stuck thread is
  abandoned), but a grader that kills the process kills the caller.

Why not ``concurrent.futures.ProcessPoolExecutor``: one dead worker breaks that pool for every
job. Here each worker is watched on its own: when a worker dies, a job that was alone on it is the
culprit; jobs that shared it are re-run one per fresh process ("solo"), so the culprit is named
exactly and innocent jobs still get their real verdict. A worker holding a timed-out job stops
taking work and is killed once its other jobs finish; a fresh worker takes its place at once.

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
import math
import multiprocessing as mp
import pickle
import queue
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any, Literal

import orjson

from proofgym.core import ConfigError, ProofgymError, Verdict, describe_exception
from proofgym.env import VerificationJob
from proofgym.verify.pool_worker import READY, exit_reason, run_job, worker_main

Backend = Literal["process", "inline"]
JobKey = tuple[str, str, str, str, str]

#: How long a new worker process may take to start before its jobs' clocks run anyway.
_STARTUP_ALLOWANCE_S = 30.0
#: How much longer than a task's own grading timeout the pool waits for its job.
GRADING_MARGIN_S = 5.0


class PoolClosedError(ProofgymError, RuntimeError):
    """A job was submitted to a :class:`VerifierPool` that was already closed."""


def job_key(job: VerificationJob, contract_id: str = "") -> JobKey:
    """What makes two jobs the same job: contract, task content, trace, artifact, verifier
    version. Equal keys grade to the same verdict, so only equal keys may share one."""
    trace = hashlib.sha256(orjson.dumps(job.trace.to_list(), default=repr,
                                        option=orjson.OPT_SORT_KEYS)).hexdigest()
    return (str(contract_id), str(job.task.content_hash), trace, job.artifact.digest,
            str(job.task.verifier_version))


def job_timeout(job: VerificationJob, timeout_s: float) -> float:
    """The pool's limit for ``job``: always longer than the task's own grading timeout, so the
    task's runner (which turns its own timeout into a *scored* 0) answers first."""
    own = getattr(job.task, "grading_timeout_s", None)
    if isinstance(own, (int, float)) and own > 0 and own + GRADING_MARGIN_S > timeout_s:
        return float(own) + GRADING_MARGIN_S
    return timeout_s


@dataclass(eq=False)
class _Job:
    id: int
    key: JobKey
    payload: bytes | VerificationJob
    timeout_s: float
    future: cf.Future[Verdict]
    solo: bool = False  # run alone in a fresh process (it shared a worker that died)
    deadline: float = math.inf
    worker: _Worker | None = None


@dataclass(eq=False)
class _Worker:
    process: Any
    conn: Connection
    capacity: int
    solo: bool = False
    draining: bool = False  # takes no new jobs; killed once its in-flight jobs are done
    inflight: dict[int, _Job] = field(default_factory=dict)
    retired: bool = False
    ready: bool = False


class VerifierPool:
    """Grades :class:`VerificationJob` s off the generation path.

    Args:
        backend: ``"process"`` (crash-isolated worker processes) or ``"inline"`` (threads here).
        processes: Worker processes (``process`` backend).
        max_in_flight: Jobs graded at once, over all workers; the rest wait in order. Set it
            above ``processes`` when graders mostly wait (on 2 cores: 2 processes, 64 in flight).
        timeout_s: Default per-job time limit, counted from when the job starts running; a job
            whose task declares a longer ``grading_timeout_s`` gets that plus a margin.
        start_method: multiprocessing start method; ``forkserver`` keeps workers clean of the
            parent's threads and locks.

    Invariants: every submitted job's future resolves exactly once, with a :class:`Verdict`
    (never an exception); a verdict is ``status="error"`` when grading failed, never a silent 0.
    """

    def __init__(self, backend: Backend = "process", *, processes: int = 2, max_in_flight: int = 64,
                 timeout_s: float = 60.0, start_method: str = "forkserver",
                 preload: Sequence[str] = ()) -> None:
        if backend not in ("process", "inline"):
            raise ConfigError(f"unknown verifier backend {backend!r}; use 'process' or 'inline'")
        if processes < 1 or max_in_flight < 1 or not timeout_s > 0:
            raise ConfigError(f"the verifier pool needs processes >= 1, max_in_flight >= 1 and a timeout "
                              f"> 0 s (got {processes}, {max_in_flight}, {timeout_s:g} s)")
        self.backend: Backend = backend
        self.processes = processes
        self.max_in_flight = max_in_flight
        self.timeout_s = timeout_s
        self._ctx = mp.get_context(start_method) if backend == "process" else None
        self._preload = ["proofgym", "proofgym.verify.warmup", *preload]
        self._modules: dict[str, None] = {}  # task modules seen, imported by each new worker
        self._start_method = start_method
        self._per_worker = math.ceil(max_in_flight / processes)
        # The event loop only ever touches _keys_lock and the inbox, so it never waits on a lock
        # a worker-facing thread holds; _lock guards the scheduling state of those threads.
        self._lock = threading.Lock()
        self._keys_lock = threading.Lock()
        self._inbox: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._inline_jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._idle_threads = 0  # inline backend: grader threads waiting for a job
        self._pending: deque[_Job] = deque()
        self._running: dict[int, _Job] = {}
        self._workers: list[_Worker] = []
        # Only jobs in flight: an identical submission joins one; a resolved job's key is dropped.
        self._futures: dict[JobKey, cf.Future[Verdict]] = {}
        self._ids = itertools.count()
        self._closed = False
        self._supervisor: threading.Thread | None = None
        self.stats = {"submitted": 0, "deduplicated": 0, "graded": 0, "errors": 0, "timeouts": 0,
                      "worker_deaths": 0, "workers_started": 0}

    # ------------------------------------------------------------------ public
    def submit(self, job: VerificationJob, trajectory_id: str, *, timeout_s: float | None = None,
               contract_id: str = "") -> cf.Future[Verdict]:
        """Queue ``job`` and return a future of its :class:`Verdict`.

        An identical job still in flight (see :func:`job_key`) shares its future; once a job has
        resolved, the same job submitted again is graded again. ``trajectory_id`` names the job in
        error messages only.
        """
        key = job_key(job, contract_id)
        with self._keys_lock:
            if self._closed:
                raise PoolClosedError("VerifierPool is closed")
            known = self._futures.get(key)
            if known is not None:
                self.stats["deduplicated"] += 1
                return known
            future: cf.Future[Verdict] = cf.Future()
            self._futures[key] = future
            self.stats["submitted"] += 1
        payload: bytes | VerificationJob = job  # inline jobs run as they are: no copy needed
        if self.backend == "process":
            try:
                payload = pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as exc:
                self._settle(key, future, Verdict.failed(
                    f"verification job for {trajectory_id!r} cannot be pickled ({describe_exception(exc)}); "
                    "define the task class at module level, or use the 'inline' verifier backend"))
                return future
        limit = job_timeout(job, self.timeout_s if timeout_s is None else timeout_s)
        with self._keys_lock:
            closed = self._closed
            if not closed:
                module = type(job.task).__module__
                if module != "__main__":
                    self._modules[module] = None
                self._ensure_supervisor()
                # Queued under the lock close() takes first, so close() always finds it in the inbox.
                self._inbox.put(_Job(next(self._ids), key, payload, limit, future))
        if closed:  # closed while this job was being pickled: answer it, never drop it
            self._settle(key, future, Verdict.failed("the verifier pool was closed before this job "
                                                     "was graded"))
        return future

    async def grade(self, job: VerificationJob, trajectory_id: str, *,
                    timeout_s: float | None = None, contract_id: str = "") -> Verdict:
        """Submit ``job`` and await its verdict."""
        return await asyncio.wrap_future(self.submit(job, trajectory_id, timeout_s=timeout_s,
                                                     contract_id=contract_id))

    @property
    def in_flight(self) -> int:
        with self._lock:
            return len(self._running) + len(self._pending)

    def describe(self) -> dict[str, Any]:
        return {"backend": self.backend, "processes": self.processes if self.backend == "process" else 0,
                "max_in_flight": self.max_in_flight, "timeout_s": self.timeout_s}

    def close(self) -> None:
        """Stop the workers. Jobs not yet graded resolve as error verdicts ("pool closed")."""
        with self._keys_lock, self._lock:
            if self._closed:
                return
            self._closed = True
            left = list(self._pending) + list(self._running.values())
            self._pending.clear()
            self._running.clear()
            workers = list(self._workers)
            self._workers.clear()
        while True:  # jobs submitted but not yet picked up by the supervisor
            try:
                item = self._inbox.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                left.append(item)
        self._wake()  # the supervisor sees _closed and exits
        for _ in range(self._idle_threads):
            self._inline_jobs.put(None)
        for job in left:
            self._resolve_future(job.future, Verdict.failed("the verifier pool was closed before "
                                                            "this job was graded"))
        for worker in workers:
            worker.retired = True
            if worker.inflight:  # its jobs were already answered "closed": do not wait for them
                worker.process.kill()
            with contextlib.suppress(OSError, ValueError):
                worker.conn.send(None)
        for worker in workers:
            worker.process.join(timeout=2.0)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join(timeout=2.0)
            # Its reader thread closes the connection once it sees the worker gone.
        if self._supervisor is not None:
            self._supervisor.join(timeout=2.0)

    def __enter__(self) -> VerifierPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -------------------------------------------------------------- internals
    def _ensure_supervisor(self) -> None:
        if self._supervisor is None:
            self._supervisor = threading.Thread(target=self._supervise, name="proofgym-verifier-pool",
                                                daemon=True)
            self._supervisor.start()

    def _wake(self) -> None:
        self._inbox.put(None)

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
            sends: list[tuple[_Worker, _Job]] = []
            with self._lock:
                if self._closed:
                    return
                self._pending.extend(item for item in items if item is not None)
                try:
                    sends = self._dispatch()
                except Exception as exc:  # cannot start a worker: fail what waits, loudly
                    reason = (f"the verifier pool could not start a worker process: "
                              f"{describe_exception(exc)}; scripts that use the process backend "
                              "need an `if __name__ == '__main__':` guard")
                    for job in self._pending:
                        self._fail_later(job, reason)
                    self._pending.clear()
                now = time.monotonic()
                for job in [j for j in self._running.values() if j.deadline <= now]:
                    self._expire(job)
                deadline = min((j.deadline for j in self._running.values()), default=math.inf)
            # Pipe writes happen outside the lock (a full pipe must not stall the other threads).
            for worker, job in sends:
                # If the worker died, its reader thread reports it and re-queues or fails the job.
                with contextlib.suppress(OSError, ValueError):
                    worker.conn.send((job.id, job.payload))
            timeout = None if deadline == math.inf else max(0.0, deadline - time.monotonic()) + 0.001

    def _dispatch(self) -> list[tuple[_Worker, _Job]]:
        """With the lock held: assign waiting jobs to workers; returns the sends to make."""
        sends = []
        while self._pending and len(self._running) < self.max_in_flight:
            job = self._pending[0]
            if self.backend == "inline":
                self._pending.popleft()
                self._start_inline(job)
                continue
            worker = self._solo_worker() if job.solo else self._free_worker()
            if worker is None:
                break
            self._pending.popleft()
            self._assign(worker, job)
            sends.append((worker, job))
        return sends

    def _start_inline(self, job: _Job) -> None:
        """With the lock held: hand the job to a grader thread (started on demand, then reused;
        one stuck past its timeout is abandoned and a fresh thread takes its place)."""
        job.deadline = time.monotonic() + job.timeout_s
        self._running[job.id] = job
        if self._idle_threads == 0:
            self._idle_threads += 1
            threading.Thread(target=self._inline_worker, name="proofgym-grader", daemon=True).start()
        self._idle_threads -= 1
        self._inline_jobs.put(job)

    def _inline_worker(self) -> None:
        while True:
            job = self._inline_jobs.get()
            if job is None:
                return
            verdict = run_job(job.payload)
            with self._lock:
                if job.id not in self._running and job.deadline <= time.monotonic():
                    return  # timed out: this thread was written off and replaced; let it end
                self._idle_threads += 1
            self._finish(job.id, verdict)

    def _free_worker(self) -> _Worker | None:
        regular = [w for w in self._workers if not w.solo and not w.draining and not w.retired]
        while len(regular) < self.processes:
            regular.append(self._start_worker(self._per_worker))
        best = min(regular, key=lambda w: len(w.inflight))
        return best if len(best.inflight) < best.capacity else None

    def _solo_worker(self) -> _Worker:
        return self._start_worker(1, solo=True)

    def _start_worker(self, capacity: int, *, solo: bool = False) -> _Worker:
        assert self._ctx is not None
        if self._start_method == "forkserver" and self.stats["workers_started"] == 0:
            # Workers fork from a server that has these imported (sympy alone takes seconds);
            # only the first pool of a process starts that server, so this is best effort.
            self._ctx.set_forkserver_preload(list(dict.fromkeys(self._preload + list(self._modules))))
        parent_conn, child_conn = self._ctx.Pipe(duplex=True)
        process = self._ctx.Process(target=worker_main, args=(child_conn, capacity, list(self._modules)),
                                    name="proofgym-verifier", daemon=True)
        process.start()
        child_conn.close()  # so the parent sees EOF when the worker dies
        worker = _Worker(process, parent_conn, capacity, solo=solo)
        self._workers.append(worker)
        self.stats["workers_started"] += 1
        threading.Thread(target=self._read, args=(worker,), name="proofgym-verifier-reader",
                         daemon=True).start()
        return worker

    def _assign(self, worker: _Worker, job: _Job) -> None:
        job.worker = worker
        job.deadline = time.monotonic() + job.timeout_s + (0.0 if worker.ready else _STARTUP_ALLOWANCE_S)
        worker.inflight[job.id] = job
        self._running[job.id] = job

    def _read(self, worker: _Worker) -> None:
        """Per-worker thread: deliver results; on EOF, handle the worker's death."""
        while True:
            try:
                job_id, verdict = worker.conn.recv()
            except (EOFError, OSError, TypeError, ValueError):
                break
            if job_id == READY:
                with self._lock:
                    worker.ready = True
                    now = time.monotonic()
                    for job in worker.inflight.values():
                        job.deadline = now + job.timeout_s
                self._wake()  # deadlines moved: the supervisor recomputes its sleep
                continue
            self._finish(job_id, verdict)
            with self._lock:
                if worker.solo and not worker.inflight:
                    self._retire(worker)
                elif worker.draining and not worker.inflight:
                    self._retire(worker, kill=True)
        worker.process.join(timeout=5.0)
        self._on_worker_exit(worker)
        worker.conn.close()

    def _on_worker_exit(self, worker: _Worker) -> None:
        with self._lock:
            if worker in self._workers:
                self._workers.remove(worker)
            orphans = list(worker.inflight.values())
            worker.inflight.clear()
            if self._closed or worker.retired or not orphans:
                worker.retired = True
                self._wake()
                return
            worker.retired = True
            self.stats["worker_deaths"] += 1
            reason = exit_reason(worker.process.exitcode)
            if worker.solo:
                # A job running alone in its own process killed it: the culprit, exactly.
                job = orphans[0]
                self._running.pop(job.id, None)
                self._fail_later(job, f"the grader's worker process died ({reason}) while grading "
                                      "this job; the pool replaced the worker")
            else:
                # Any of these may have killed it (or just arrived): re-run each alone to know.
                for job in orphans:
                    self._running.pop(job.id, None)
                    job.solo, job.worker, job.deadline = True, None, math.inf
                    self._pending.appendleft(job)
            self._wake()

    def _expire(self, job: _Job) -> None:
        """Called with the lock held: the job ran past its timeout."""
        self._running.pop(job.id, None)
        self.stats["timeouts"] += 1
        worker = job.worker
        if worker is not None:
            worker.inflight.pop(job.id, None)
            if not worker.draining:
                worker.draining = True  # its thread is stuck; replace the worker, kill it when idle
            if not worker.inflight:
                self._retire(worker, kill=True)
        self._fail_later(job, f"the grader did not finish within the {job.timeout_s:g} s timeout and "
                              "was stopped" + ("" if worker is not None else " (its thread was abandoned)"))

    def _retire(self, worker: _Worker, *, kill: bool = False) -> None:
        if worker.retired:
            return
        worker.retired = True
        if worker in self._workers:
            self._workers.remove(worker)
        if kill:
            worker.process.kill()
        else:
            with contextlib.suppress(OSError, ValueError):
                worker.conn.send(None)
        self._wake()

    def _finish(self, job_id: int, verdict: Verdict) -> None:
        with self._lock:
            job = self._running.pop(job_id, None)
            if job is None:
                return  # timed out (already resolved) or pool closed
            if job.worker is not None:
                job.worker.inflight.pop(job_id, None)
            waiting = bool(self._pending)
        if waiting:
            self._wake()  # a slot freed up for a waiting job
        self._resolve(job, verdict)

    def _fail_later(self, job: _Job, reason: str) -> None:
        # Resolve outside the lock: future callbacks may call back into the pool.
        threading.Thread(target=self._resolve, args=(job, Verdict.failed(reason)), daemon=True).start()

    def _resolve(self, job: _Job, verdict: Verdict) -> None:
        with self._lock:
            self.stats["graded"] += 1
            if verdict.status == "error":
                self.stats["errors"] += 1
        self._settle(job.key, job.future, verdict)

    def _settle(self, key: JobKey, future: cf.Future[Verdict], verdict: Verdict) -> None:
        with self._keys_lock:  # forgotten first: a later identical submission is graded anew
            if self._futures.get(key) is future:
                del self._futures[key]
        self._resolve_future(future, verdict)

    @staticmethod
    def _resolve_future(future: cf.Future[Verdict], verdict: Verdict) -> None:
        # Resolved already (a closed pool racing a late result): the first answer stands.
        with contextlib.suppress(cf.InvalidStateError):
            future.set_result(verdict)
