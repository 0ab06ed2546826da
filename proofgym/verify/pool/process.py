"""The ``process`` backend of the :class:`~proofgym.verify.pool.VerifierPool` (the default): a few
worker processes, each running many jobs at once on threads (graders mostly *wait*: a remote test
runner, an LLM judge), so jobs in flight are set apart from processes.

Why not ``concurrent.futures.ProcessPoolExecutor``: one dead worker breaks that pool for every
job. Here each worker is watched on its own: when a worker dies, a job that was alone on it is the
culprit; jobs that shared it are re-run one per fresh process ("solo"), so the culprit is named
exactly and innocent jobs still get their real verdict. A worker holding a timed-out job stops
taking work and is killed once its other jobs finish; a fresh worker takes its place at once.
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing as mp
import os
import pickle
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from proofgym.env import VerificationJob
from proofgym.verify.pool.backend import PoolJob, Scheduler
from proofgym.verify.pool.worker import READY, STARTED, exit_reason, worker_main

#: How long a new worker process may take to start before its jobs' clocks run anyway.
STARTUP_ALLOWANCE_S = 30.0


def _noop() -> None:
    """The child :meth:`ProcessBackend.warm` waits on."""


@dataclass(eq=False)
class _Worker:
    process: Any
    conn: Connection
    capacity: int
    solo: bool = False
    draining: bool = False  # takes no new jobs; killed once its in-flight jobs are done
    inflight: dict[int, PoolJob] = field(default_factory=dict)
    retired: bool = False
    ready: bool = False
    modules: set[str] = field(default_factory=set)  # the task modules it imports or was sent


class ProcessBackend:
    name = "process"

    def __init__(self, scheduler: Scheduler, *, processes: int, max_in_flight: int,
                 start_method: str = "forkserver", preload: Sequence[str] = ()) -> None:
        self._scheduler = scheduler
        self.processes = processes
        self._per_worker = math.ceil(max_in_flight / processes)
        self._ctx = mp.get_context(start_method)
        self._start_method = start_method
        # forkserver_tie: the forkserver (and so its workers) ends as soon as this process does
        self._preload = ["proofgym", "proofgym.verify.pool.forkserver_tie", *preload]
        self._modules: dict[str, None] = {}  # task modules seen, imported by each new worker
        self._workers: list[_Worker] = []

    def encode(self, job: VerificationJob) -> bytes:
        module = type(job.task).__module__
        payload = pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL)
        if module != "__main__":
            self._modules[module] = None  # a dict assignment: atomic under the GIL
        return payload

    def add_modules(self, modules: Sequence[str]) -> None:
        """Task modules the workers import before taking jobs (the ones not started yet)."""
        for module in modules:
            if module and module != "__main__":
                self._modules[module] = None

    def warm(self) -> None:
        """No lock held: boot the forkserver (its preload imports the graders' code: seconds) by
        forking a throwaway child from it, so that starting workers under the lock is quick."""
        if self._start_method != "forkserver":
            return
        with self._scheduler.lock:
            if self._scheduler.stats["workers_started"]:
                return  # a job got here first: the server is up (or coming up) already
            self._set_preload()
        probe = self._ctx.Process(target=_noop, name="proofgym-verifier-warmup", daemon=True)
        probe.start()  # returns once the server has forked it: the preload is done
        # it would only import the __main__ module and leave: CPU the workers need
        probe.kill()
        probe.join()

    # ------------------------------------------------------------- scheduling (lock held)
    def prestart(self) -> None:
        """Start the regular workers before a job needs one (:meth:`VerifierPool.start`)."""
        self._free_worker()

    def _set_preload(self) -> None:
        _short_socket_dir()
        # Workers fork from a server that has these imported (sympy alone takes seconds); only
        # the first pool of a process starts that server, so this is best effort.
        # the warm-up last: it warms the math check up only if a module loaded before it uses it
        self._ctx.set_forkserver_preload(list(dict.fromkeys(
            [*self._preload, *self._modules, "proofgym.verify.pool.forkserver_warmup"])))

    def start(self, job: PoolJob) -> Callable[[], None] | bool:
        worker = self._start_worker(1, solo=True) if job.solo else self._free_worker()
        if worker is None:
            return False
        job.place = worker
        # a task module new to the worker is imported there first, off the job's clock (the
        # worker says when the job starts: STARTED)
        fresh = job.module if job.module not in worker.modules and job.module != "__main__" else ""
        worker.modules.add(job.module)
        job.importing = bool(fresh)
        job.deadline = time.monotonic() + job.timeout_s + (
            0.0 if worker.ready and not fresh else STARTUP_ALLOWANCE_S)
        worker.inflight[job.id] = job

        def send() -> None:
            # If the worker died, its reader thread reports it and re-queues or fails the job.
            with contextlib.suppress(OSError, ValueError):
                worker.conn.send((job.id, job.payload, fresh))
        return send

    def finished(self, job: PoolJob) -> None:
        worker: _Worker | None = job.place
        if worker is None:
            return
        worker.inflight.pop(job.id, None)
        if worker.solo and not worker.inflight:
            self._retire(worker)
        elif worker.draining and not worker.inflight:
            self._retire(worker, kill=True)

    def expired(self, job: PoolJob) -> str:
        worker: _Worker | None = job.place
        if worker is None:
            return ""
        worker.inflight.pop(job.id, None)
        worker.draining = True  # its thread is stuck; replace the worker, kill it when idle
        if not worker.inflight:
            self._retire(worker, kill=True)
        return ""

    def _free_worker(self) -> _Worker | None:
        regular = [w for w in self._workers if not w.solo and not w.draining and not w.retired]
        while len(regular) < self.processes:
            regular.append(self._start_worker(self._per_worker))
        best = min(regular, key=lambda w: len(w.inflight))
        return best if len(best.inflight) < best.capacity else None

    def _start_worker(self, capacity: int, *, solo: bool = False) -> _Worker:
        stats = self._scheduler.stats
        if self._start_method == "forkserver" and stats["workers_started"] == 0:
            self._set_preload()
        parent_conn, child_conn = self._ctx.Pipe(duplex=True)
        # one list for both: a module a job adds while the process starts is new to this worker
        # (imported, and warmed up for, off the job's clock when the job comes)
        modules = list(self._modules)
        process = self._ctx.Process(target=worker_main,
                                    args=(child_conn, capacity, modules, os.getpid()),
                                    name="proofgym-verifier", daemon=True)
        process.start()
        child_conn.close()  # so the parent sees EOF when the worker dies
        worker = _Worker(process, parent_conn, capacity, solo=solo, modules=set(modules))
        self._workers.append(worker)
        stats["workers_started"] += 1
        threading.Thread(target=self._read, args=(worker,), name="proofgym-verifier-reader",
                         daemon=True).start()
        return worker

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
        self._scheduler.wake()

    # ------------------------------------------------------------- per-worker reader thread
    def _read(self, worker: _Worker) -> None:
        """Deliver results; on EOF, handle the worker's death."""
        while True:
            try:
                job_id, verdict, *ran = worker.conn.recv()  # ran: the worker's own clock
            except (EOFError, OSError, TypeError, ValueError):
                break
            if job_id == READY:
                with self._scheduler.lock:
                    worker.ready = True
                    self._scheduler.worker_ready()
                    now = time.monotonic()
                    for job in worker.inflight.values():
                        if not job.importing:  # those start their clocks when imported
                            job.deadline, job.started = now + job.timeout_s, now
                self._scheduler.wake()  # deadlines moved: the scheduler recomputes its sleep
                continue
            if job_id == STARTED:  # its task module is imported: the job's clock starts now
                with self._scheduler.lock:
                    job = worker.inflight.get(verdict)
                    if job is not None:
                        job.importing, job.started = False, time.monotonic()
                        job.deadline = job.started + job.timeout_s
                self._scheduler.wake()
                continue
            self._scheduler.finish(job_id, verdict, ran[0] if ran else None)
        worker.process.join(timeout=5.0)
        self._on_exit(worker)
        worker.conn.close()

    def _on_exit(self, worker: _Worker) -> None:
        scheduler = self._scheduler
        with scheduler.lock:
            if worker in self._workers:
                self._workers.remove(worker)
            orphans = list(worker.inflight.values())
            worker.inflight.clear()
            if scheduler.closed or worker.retired or not orphans:
                worker.retired = True
                scheduler.wake()
                return
            worker.retired = True
            scheduler.stats["worker_deaths"] += 1
            reason = exit_reason(worker.process.exitcode)
            if worker.solo and not worker.ready:
                # It died before it could take a job: the script it re-imports ran its own code
                scheduler.fail_later(orphans[0], f"the grader's worker process died while starting "
                                                 f"({reason}), before it graded this job: worker "
                                                 "processes re-import the script that started them, "
                                                 "so a script's code must be under `if __name__ == "
                                                 "'__main__':` (or use the 'inline' verifier backend)")
            elif worker.solo:
                # A job running alone in its own process killed it: the culprit, exactly.
                scheduler.fail_later(orphans[0], f"the grader's worker process died ({reason}) while "
                                                 "grading this job; the pool replaced the worker")
            else:
                # Any of these may have killed it (or just arrived): re-run each alone to know.
                for job in orphans:
                    scheduler.requeue_solo(job)
            scheduler.wake()

    def close(self) -> None:
        with self._scheduler.lock:
            workers = list(self._workers)
            self._workers.clear()
        for worker in workers:
            worker.retired = True
            if worker.inflight:  # its jobs were already answered "closed": do not wait for them
                worker.process.kill()
            with contextlib.suppress(OSError, ValueError):
                worker.conn.send(None)
        for worker in workers:
            worker.process.join(timeout=10.0)  # time to tear its pre-booted grading runners down
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join(timeout=2.0)
            # Its reader thread closes the connection once it sees the worker gone.


#: A Unix socket's path holds at most 107 bytes (``sun_path``).
_SUN_PATH_MAX = 107


def _short_socket_dir() -> None:
    """The forkserver listens on a Unix socket in multiprocessing's temp dir (``pymp-*`` under
    ``TMPDIR``); under a long ``TMPDIR`` (a test runner's per-test directory, say) that path is
    too long and no worker can start ("AF_UNIX path too long"). Then the temp dir is made in
    ``/tmp`` instead, the way multiprocessing makes its own (removed at exit)."""
    import shutil
    import tempfile
    from multiprocessing import process, util

    config = process.current_process()._config  # where multiprocessing.util.get_temp_dir keeps it
    chosen = config.get("tempdir") or tempfile.gettempdir()
    if len(os.path.join(chosen, "pymp-xxxxxxxx", "listener-xxxxxxxx")) <= _SUN_PATH_MAX:
        return
    short = tempfile.mkdtemp(prefix="pymp-", dir="/tmp")
    util.Finalize(None, shutil.rmtree, args=(short, True), exitpriority=-100)
    config["tempdir"] = short
