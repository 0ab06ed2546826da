"""The worker side of the :class:`~proofgym.verify.pool.VerifierPool`: what runs in a grader
process (and, for the inline backend, on a grader thread)."""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import ctypes
import importlib
import os
import pickle
import select
import signal
import sys
import threading
import time
from collections.abc import Sequence
from multiprocessing.connection import Connection

from proofgym.core import Verdict, describe_exception
from proofgym.env import VerificationJob
from proofgym.verify.pool.warmup import warm_up_for

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


def worker_main(conn: Connection, threads: int, modules: Sequence[str], owner: int | None = None) -> None:
    """A worker process: receive ``(job_id, payload)``, grade on a thread, send ``(job_id, verdict)``.

    ``owner``: the pid of the pool's process. When it is gone (killed, or exited without closing
    the pool) this worker exits at once, its graders' threads with it: nobody waits for their
    verdicts. Its sandboxes go with it (their spawner tidies up, see ``spawner.py``)."""
    if owner is not None:
        tie_to_owner(owner)
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


_PR_SET_PDEATHSIG = 1


def tie_to_owner(owner: int) -> None:
    """End this process as soon as ``owner`` is gone, even while every thread is busy.

    Two ties: the kernel's parent-death signal (``SIGKILL``), when the parent is not the owner
    itself but the forkserver, which exits as soon as the owner does (with the ``fork`` and
    ``spawn`` start methods the parent is the owner, and the signal would come when the owner's
    *thread* that started us ends); and a thread waiting on a pidfd of the owner, for any parent.
    The owner may already be gone by the time the ties are made: then this exits at once."""
    if os.getppid() != owner:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    try:
        # the forkserver outlives the owner by a moment only: if it died before the signal was
        # set, the owner was gone before that, and this fails (or the pidfd is readable at once)
        pidfd = os.pidfd_open(owner)
    except ProcessLookupError:
        os._exit(1)

    def watch() -> None:
        select.select([pidfd], [], [])
        os._exit(1)

    threading.Thread(target=watch, name="proofgym-owner-watch", daemon=True).start()


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _serve(conn: Connection, threads: int, modules: Sequence[str]) -> None:
    for module in modules:  # the graders' code, imported before job clocks start
        with contextlib.suppress(Exception):  # an import error shows up, clearly, in the job
            importlib.import_module(module)
    warm_up_for(modules)  # (the forkserver may have started before these modules were known)
    send_lock = threading.Lock()
    pool = cf.ThreadPoolExecutor(max(1, threads), thread_name_prefix="proofgym-grader")
    conn.send((READY, None))  # job timeouts start now, not while the process was starting

    def run(job_id: int, payload: bytes, module: str = "") -> None:
        if module:  # the task's code, new to this worker: imported before the job's clock starts
            with contextlib.suppress(Exception):  # an import error shows up, clearly, in the job
                importlib.import_module(module)
            warm_up_for([module])
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
            # the owner is gone without saying so (killed, or its process ended): nobody is
            # left to take the verdicts, so do not wait for the graders still running
            os._exit(1)
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
