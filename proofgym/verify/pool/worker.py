"""The worker side of the :class:`~proofgym.verify.pool.VerifierPool`: what runs in a grader
process (and, for the inline backend, on a grader thread)."""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import importlib
import pickle
import signal
import sys
import threading
import time
from collections.abc import Sequence
from multiprocessing.connection import Connection

from proofgym.core import Verdict, describe_exception
from proofgym.env import VerificationJob

#: The job id of a worker's "ready" message (its job clocks start then).
READY = -1
#: The tag of a worker's ``(STARTED, job_id)`` message: a job whose task module the worker had to
#: import first starts its clock then.
STARTED = -2


def run_job(payload: bytes | VerificationJob) -> Verdict:
    """Unpickle (if pickled) and grade one job; never raises (a broken job is an error verdict)."""
    try:
        job = pickle.loads(payload) if isinstance(payload, bytes) else payload
    except Exception as exc:
        return Verdict.failed(f"cannot load the verification job in the worker: {describe_exception(exc)}")
    try:
        return job.run()
    except BaseException as exc:  # job.run() catches grader errors; this is the last resort
        return Verdict.failed(f"verification job failed: {describe_exception(exc)}")


def worker_main(conn: Connection, threads: int, modules: Sequence[str]) -> None:
    """A worker process: receive ``(job_id, payload)``, grade on a thread, send ``(job_id, verdict)``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent owns shutdown (Ctrl-C goes to it)
    # multiprocessing terminates a pool's workers (SIGTERM) when their parent exits without
    # closing the pool: leave through the clean-up below, not at once
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        _serve(conn, threads, modules)
    finally:
        # multiprocessing ends a worker with os._exit, which skips atexit: tear the pre-booted
        # grading runners (sandboxes with mounts) down here, or they would outlive the pool
        warm = sys.modules.get("proofgym.verify.sandboxed.warm_runners")
        if warm is not None:
            warm.WARM.close()


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _serve(conn: Connection, threads: int, modules: Sequence[str]) -> None:
    for module in modules:  # the graders' code, imported before job clocks start
        with contextlib.suppress(Exception):  # an import error shows up, clearly, in the job
            importlib.import_module(module)
    send_lock = threading.Lock()
    pool = cf.ThreadPoolExecutor(max(1, threads), thread_name_prefix="proofgym-grader")
    conn.send((READY, None))  # job timeouts start now, not while the process was starting

    def run(job_id: int, payload: bytes, module: str = "") -> None:
        if module:  # the task's code, new to this worker: imported before the job's clock starts
            with contextlib.suppress(Exception):  # an import error shows up, clearly, in the job
                importlib.import_module(module)
            with send_lock, contextlib.suppress(OSError, ValueError):
                conn.send((STARTED, job_id))
        started = time.perf_counter()
        verdict = run_job(payload)
        ran_s = time.perf_counter() - started  # booked as the episode's grading time
        with send_lock, contextlib.suppress(OSError, ValueError):  # parent gone: no one to report to
            conn.send((job_id, verdict, ran_s))

    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            break
        if message is None:
            break
        pool.submit(run, *message)
    pool.shutdown(wait=True)


def exit_reason(code: int | None) -> str:
    if code is None:
        return "exit code unknown"
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"
