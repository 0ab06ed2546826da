"""``DaemonThreads``: the one abandon-on-timeout thread pool (in-process tools, rubric components,
the ``inline`` verifier backend)."""

from __future__ import annotations

import concurrent.futures as cf
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from proofgym.daemon import DaemonThreads
from tests.conftest import REPO


def _threads(name: str) -> int:
    return sum(t.name == name for t in threading.enumerate())


def test_a_stuck_call_costs_one_thread_never_the_next_call() -> None:
    pool = DaemonThreads("pg-test-stuck")
    release = threading.Event()
    try:
        stuck = pool.submit(release.wait)
        with pytest.raises(cf.TimeoutError):
            stuck.result(timeout=0.1)  # the caller gives up: the call is abandoned
        assert pool.submit(lambda: 6 * 7).result(timeout=10) == 42
        assert _threads("pg-test-stuck") == 2
        for _ in range(5):  # finished threads are reused: no thread per call
            assert pool.submit(sum, [1, 2]).result(timeout=10) == 3
        assert _threads("pg-test-stuck") == 2
        with pytest.raises(ZeroDivisionError):
            pool.submit(lambda: 1 / 0).result(timeout=10)  # the exception reaches the caller
        release.set()
        assert stuck.result(timeout=10) is True  # a late call frees its thread for reuse
        deadline = time.monotonic() + 10
        while pool.idle < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert pool.idle == 2
    finally:
        release.set()
        pool.shutdown()
    deadline = time.monotonic() + 10
    while _threads("pg-test-stuck") and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _threads("pg-test-stuck") == 0  # shutdown ended the idle threads
    with pytest.raises(RuntimeError, match="after shutdown"):
        pool.submit(print)


def test_a_call_stuck_forever_does_not_hold_up_interpreter_exit() -> None:
    script = textwrap.dedent("""
        import threading
        from proofgym.daemon import DaemonThreads
        pool = DaemonThreads("stuck")
        pool.submit(threading.Event().wait)
        print(pool.submit(lambda: "next call ran").result(timeout=10))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "next call ran"


def test_a_forked_child_starts_its_own_threads() -> None:
    pool = DaemonThreads("pg-test-fork")
    try:
        assert pool.submit(os.getpid).result(timeout=10) == os.getpid()  # one idle thread now
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: the parent's idle thread did not come along
            try:
                os.write(write, str(pool.submit(os.getpid).result(timeout=10)).encode())
            finally:
                os._exit(0)
        os.close(write)
        with os.fdopen(read) as answer:
            assert answer.read() == str(pid)
        assert os.waitpid(pid, 0)[1] == 0
    finally:
        pool.shutdown()
