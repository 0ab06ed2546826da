"""VerifierPool start-up: workers booted ahead of the first job, and grading time booked as the
time a job ran in its worker (not its wait for the pool to start, nor its place in the queue)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

import pytest

from proofgym import Artifact, Task, TaskSpec, Trace
from proofgym.env import VerificationJob
from proofgym.verify.pool import VerifierPool
from proofgym.verify.pool.verifier_pool import PoolClosedError, grading_seconds
from tests.conftest import REPO


@dataclass(frozen=True)
class SleepTask(Task):
    """Scores 1.0 after sleeping ``seconds`` (a grader whose run time is known)."""

    name: str
    seconds: float

    @property
    def id(self) -> str:
        return self.name

    def get_spec(self) -> TaskSpec:
        return TaskSpec(f"task {self.name}")

    def verify(self, trace: Trace, runtime: Any) -> float:
        time.sleep(self.seconds)
        return 1.0


def sleep_job(name: str, seconds: float) -> VerificationJob:
    return VerificationJob(SleepTask(name, seconds), Trace(), Artifact("inprocess"))


def wait_for_startup(pool: VerifierPool, limit_s: float = 120.0) -> float:
    deadline = time.monotonic() + limit_s
    while pool.startup_s is None:
        assert time.monotonic() < deadline, "the pool's workers never became ready"
        time.sleep(0.02)
    return pool.startup_s


def test_a_process_pool_boots_its_workers_when_made() -> None:
    with VerifierPool("process", processes=2, max_in_flight=2) as pool:
        wait_for_startup(pool)
        assert pool.stats["workers_started"] == 2 and pool.stats["submitted"] == 0


def test_closing_a_pool_that_is_still_booting_does_not_wait_for_the_boot() -> None:
    pool = VerifierPool("process", processes=2, max_in_flight=2)
    closing = time.monotonic()
    pool.close()
    assert time.monotonic() - closing < 1.0
    with pytest.raises(PoolClosedError):
        pool.submit(sleep_job("late", 0.0), "late")


def test_a_process_that_closes_a_booting_pool_and_exits_leaves_no_traceback() -> None:
    """A closed pool's forkserver, left mid-start by a process that exits at once, goes
    quietly: it once printed EOFError's traceback to the stderr they share (after an eval that
    failed at once on a bad env id; the forkserver now leaves as soon as its owner is gone)."""
    script = ("from proofgym.verify.pool import VerifierPool\n"
              "VerifierPool('process', processes=2, max_in_flight=2).close()\n")
    for _ in range(3):
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr


def test_start_boots_every_worker_before_any_job_and_returns_at_once() -> None:
    with VerifierPool("process", processes=2, max_in_flight=2, boot=False) as pool:
        time.sleep(0.3)
        assert pool.stats["workers_started"] == 0 and pool.startup_s is None  # boot=False: nothing yet
        asked = time.monotonic()
        pool.start([__name__])
        assert time.monotonic() - asked < 0.5, "start() waited for the workers"
        startup = wait_for_startup(pool)
        assert startup > 0
        assert pool.stats["workers_started"] == 2 and pool.stats["submitted"] == 0
        pool.start([__name__])  # again: no more workers
        verdict = pool.grade_sync(sleep_job("a", 0.0), "a")
        assert verdict.reward == 1.0 and verdict.status == "scored"
        assert pool.stats["workers_started"] == 2


def test_booked_grading_time_leaves_out_the_start_up_and_the_queue() -> None:
    # one worker, one job at a time: the third job waits for the pool to start and for two others
    with VerifierPool("process", processes=1, max_in_flight=1) as pool:
        submitted = time.monotonic()
        futures = [pool.submit(sleep_job(f"j{i}", 0.2), f"j{i}") for i in range(3)]
        verdicts = [f.result(timeout=120) for f in futures]
        waited = time.monotonic() - submitted
        assert [v.reward for v in verdicts] == [1.0] * 3
        booked = [grading_seconds(f) for f in futures]
        assert all(b >= 0.2 for b in booked), booked  # each job's own sleep is booked
        # the third job's wall time holds the start-up and two 0.2 s jobs ahead of it; its
        # booked time holds neither
        assert waited - booked[2] >= 0.4 + 0.5 * pool.startup_s, (waited, booked, pool.startup_s)
        assert pool.startup_s is not None and pool.startup_s > 0


async def test_grade_timed_books_the_run_on_the_inline_backend_too() -> None:
    with VerifierPool("inline", max_in_flight=1) as pool:
        (first, booked_1), (second, booked_2) = await asyncio.gather(
            pool.grade_timed(sleep_job("x", 0.3), "x"), pool.grade_timed(sleep_job("y", 0.3), "y"))
    assert first.reward == second.reward == 1.0
    # the second waited 0.3 s for the first: its booked time must not hold that wait
    assert 0.3 <= booked_1 < 0.6 and 0.3 <= booked_2 < 0.6, (booked_1, booked_2)


def test_a_job_that_never_ran_books_no_grading_time() -> None:
    pool = VerifierPool("process", processes=1, max_in_flight=1)
    future = pool.submit(sleep_job("never", 5.0), "never")
    waiting = pool.submit(sleep_job("queued", 5.0), "queued")
    pool.close()
    assert future.result(timeout=30).status == "error" and waiting.result(timeout=30).status == "error"
    assert grading_seconds(waiting) == 0.0


def test_evaluate_books_no_start_up_as_grading_and_reports_it_apart(tmp_path) -> None:
    from proofgym.eval import evaluate
    from proofgym.rollout import make_policy

    # the reference policy answers at once: every job is submitted while the worker boots (a
    # spawned one, so that it takes its full time whatever this process started before)
    with VerifierPool("process", processes=1, max_in_flight=4, boot=False, start_method="spawn") as pool:
        # Arith's task module: imported, and math-verify warmed up, before the worker is ready
        pool.start(["proofgym.envs.arith.tasks"])
        trajectories, summary = evaluate("proofgym/Arith-v0", make_policy("reference"), episodes=8,
                                         concurrency=4, verifier=pool, out=tmp_path / "run")
    assert summary["mean_reward"] == 1.0 and len(trajectories) == 8
    startup = summary["time"]["verifier_startup_s"]
    assert startup is not None and startup > 0
    booked = [t.timings["verify_s"] for t in trajectories]
    assert all(b > 0 for b in booked)
    assert max(booked) < startup, (booked, startup)  # each job's own run, not the wait for the boot
    from proofgym.cli.summary_table import summary_rows

    # the CLI shows it apart
    assert ("grader start-up", f"{startup:.2f} s (once per run, not in verify)") in summary_rows(summary)


def test_a_task_module_new_to_a_running_worker_is_imported_off_the_jobs_clock() -> None:
    from tests.verify.pool.slow_import_task import IMPORT_S, SlowImportTask

    with VerifierPool("process", processes=1, max_in_flight=2, timeout_s=IMPORT_S * 0.6) as pool:
        wait_for_startup(pool)  # booted before the module was known: the worker lacks it
        future = pool.submit(VerificationJob(SlowImportTask("slow"), Trace(), Artifact("inprocess")),
                             "slow")
        verdict = future.result(timeout=120)
    assert verdict.status == "scored" and verdict.reward == 1.0, verdict  # no timeout
    assert grading_seconds(future) < IMPORT_S * 0.6  # nor is the import booked as grading


def test_the_forkserver_leaves_without_tearing_its_interpreter_down() -> None:
    import subprocess
    import sys

    from proofgym.verify.pool.process import ProcessBackend

    with VerifierPool("process", processes=1, boot=False) as pool:
        backend = pool._backend
        assert isinstance(backend, ProcessBackend)
        assert "proofgym.verify.pool.forkserver_tie" in backend._preload
    # a command that graded in a process pool: its forkserver shares its stdout, so reading the
    # output to its end returns only once the server is gone too; it leaves by os._exit (its
    # at-exit handler), past the interpreter's teardown, with status 0
    code = ("from proofgym import VerifierPool\n"
            "with VerifierPool('process', processes=1) as pool:\n"
            "    pool.start()\n"
            "print('graded')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "graded", done


def test_a_process_pool_starts_under_a_temp_dir_too_long_for_a_unix_socket(tmp_path) -> None:
    """The forkserver's socket lives in multiprocessing's temp dir: under a long TMPDIR (seen
    under pytest-xdist) its path passes the 107-byte limit of a Unix socket, and no worker
    could start. The pool still grades (the socket goes to a short dir in /tmp)."""
    import os
    import subprocess
    import sys

    long_tmp = tmp_path / ("d" * 60) / ("e" * 60)
    long_tmp.mkdir(parents=True)
    code = ("from proofgym import VerificationJob, Artifact, Trace\n"
            "from proofgym.verify.pool import VerifierPool\n"
            "from tests.verify.pool.slow_import_task import SlowImportTask\n"
            "if __name__ == '__main__':\n"
            "    with VerifierPool('process', processes=1) as pool:\n"
            "        job = VerificationJob(SlowImportTask('quick'), Trace(), Artifact('inprocess'))\n"
            "        print(pool.grade_sync(job, 'long-tmpdir').status)\n")
    env = {**os.environ, "TMPDIR": str(long_tmp), "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180,
                          env=env, cwd=REPO)
    assert done.returncode == 0 and done.stdout.strip().splitlines()[-1] == "scored", done
    assert not [p for p in long_tmp.iterdir() if p.name.startswith("pymp-")]


def test_evaluate_boots_its_pool_with_the_envs_grader_module() -> None:
    """A pool evaluate() makes (the default backend, so every library run) starts its workers
    with the env's module imported (and so math-verify warmed up where it is used): a bundled
    env's factory named ``proofgym.envs`` here, and every pool paid the import and the warm-up in
    each worker, about a second of every run."""
    from proofgym.eval.runner import _grader_modules

    assert _grader_modules("proofgym/Arith-v0") == ["proofgym.envs.arith"]
    assert _grader_modules("proofgym/CodeRepair-v0") == ["proofgym.envs.code_repair"]
    assert _grader_modules("no-such-env-v0") == []


def test_a_forkserver_child_whose_client_left_before_sending_its_process_goes_quietly() -> None:
    """The race behind the test above, made certain: a client asks the pool's forkserver for a
    child and goes before writing the process to start (its process exiting mid-``start``). The
    forked child finds end of file where its preparation data should be; it exits without a
    traceback on the stderr it shares with the pool's process."""
    script = (
        "import os, multiprocessing as mp\n"
        "from multiprocessing import forkserver\n"
        "mp.get_context('forkserver').set_forkserver_preload(\n"
        "    ['proofgym', 'proofgym.verify.pool.forkserver_tie'])\n"
        "status, data = forkserver.connect_to_new_process([])\n"
        "os.close(data)  # gone before the preparation data\n"
        "pid = forkserver.read_signed(status)\n"
        "code = forkserver.read_signed(status)\n"
        "print(pid > 0, code)\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[0] == "True" and proc.stdout.split()[1] != "0", proc.stdout
    assert "Traceback" not in proc.stderr and "EOFError" not in proc.stderr, proc.stderr
