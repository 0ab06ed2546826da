"""Issue 20: a grader that ran out of time because the host was busy has not judged.

The math check (math-verify in a worker process) is bounded by the worker's CPU time: an answer
that uses the whole CPU budget is too costly to check (a scored 0 with the reason, the same on any
host), while a check whose wall-clock limit passes before the worker had its CPU (a busy host, a
stopped worker) is a grader error, never a 0. The worker is stopped here with SIGSTOP, as a
starved process looks to the checker: wall time passes, its CPU time does not.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from proofgym import Artifact, Rubric, TurnCompleteAction
from proofgym.core import Trace, TraceStep, Verdict
from proofgym.env import VerificationJob
from proofgym.envs.arith.tasks import make_task
from proofgym.eval import evaluate, load_run
from proofgym.rollout import ReferencePolicy
from proofgym.verify import Component, MathCheckStarved, make_grader
from proofgym.verify.graders import answers
from proofgym.verify.graders.answers import math_check
from proofgym.verify.pool import VerifierPool

ARITH = "proofgym/Arith-v0"
COSTLY = "9^{9^{9}}"  # math-verify works on it until stopped


def trace(message: str) -> Trace:
    return Trace([TraceStep(TurnCompleteAction(message), {"type": "episode_end"})])


def _checker_pid() -> int:
    assert math_check("1/2", "0.5") == (True, None)  # the checker is up and warm
    pid = answers._MATH.pid
    assert pid > 0 and Path(f"/proc/{pid}").exists()
    return pid


@contextlib.contextmanager
def stopped_checker() -> Iterator[int]:
    """The math checker process, stopped (SIGSTOP) for the duration; resumed if still there."""
    pid = _checker_pid()
    os.kill(pid, signal.SIGSTOP)
    try:
        yield pid
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


@contextlib.contextmanager
def starved() -> Iterator[int]:
    """The checker stopped, and the limits graders use (the module's defaults) short enough for
    a test; both restored after, so the checks that follow run as on any host."""
    saved = answers.MATH_TIMEOUT_S, answers.MATH_CPU_S
    with stopped_checker() as pid:
        answers.MATH_TIMEOUT_S, answers.MATH_CPU_S = 3.0, 1.0
        try:
            yield pid
        finally:
            answers.MATH_TIMEOUT_S, answers.MATH_CPU_S = saved


def test_a_correct_arith_answer_scores_1_and_a_wrong_one_0() -> None:
    for index in range(8):
        task = make_task(index)
        assert task.verify(trace(f"So \\boxed{{{task.answer}}}"), None).reward == 1.0
        wrong = task.verify(trace(f"So \\boxed{{{task.wrong_answer}}}"), None)
        assert wrong.scored and wrong.reward == 0.0


def test_a_check_with_the_checker_stopped_is_an_error_never_a_zero() -> None:
    with stopped_checker() as pid:
        t0 = time.monotonic()
        with pytest.raises(MathCheckStarved, match=r"timed out after .* s of wall time having had only"):
            math_check("7", "7", timeout_s=2.0, cpu_s=1.0)
        assert 2.0 <= time.monotonic() - t0 < 60
    assert not Path(f"/proc/{pid}").exists() or b"zombie" in Path(f"/proc/{pid}/status").read_bytes()
    assert math_check("7", "7") == (True, None)  # a fresh checker judges the next answer


def test_the_same_costly_answer_is_a_scored_zero_alone_and_an_error_when_starved() -> None:
    # a wall limit far over the CPU budget, so that even a very busy host gives it its CPU
    ok, reason = math_check("3", COSTLY, timeout_s=300.0, cpu_s=0.5)
    assert not ok and "used its CPU budget of 0.5 s" in reason
    pid = _checker_pid()
    # stopped a moment after the check began: it had CPU, then none
    stopper = threading.Timer(0.3, os.kill, (pid, signal.SIGSTOP))
    stopper.start()
    try:
        with pytest.raises(MathCheckStarved, match="host was busy or the checker was stopped"):
            math_check("3", COSTLY, timeout_s=3.0, cpu_s=2.0)
    finally:
        stopper.join()
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
    assert math_check("2/4", "0.5") == (True, None)


def test_a_cpu_budget_over_the_wall_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="cpu_s <= timeout_s"):
        math_check("1", "1", timeout_s=1.0, cpu_s=2.0)


def test_a_starved_check_is_an_error_verdict_in_the_math_grader_and_its_rubric() -> None:
    grader = make_grader("math", "7")
    rubric = Rubric([Component("correct", grader)])
    with starved():
        v = grader(trace("\\boxed{7}"))
    assert isinstance(v, Verdict) and v.status == "error" and "timed out" in v.error, v
    with starved():
        v = rubric.score(trace("\\boxed{7}"))
    assert v.status == "error" and "timed out" in v.errors["correct"], v
    assert rubric.score(trace("\\boxed{7}")).reward == 1.0


def test_a_starved_arith_check_is_an_error_verdict() -> None:
    task = make_task(3)
    with starved():
        v = task.verify(trace(f"\\boxed{{{task.answer}}}"), None)
    assert v.status == "error" and "timed out" in v.error and v.metrics["answered"] == 1.0, v
    assert task.verify(trace(f"\\boxed{{{task.answer}}}"), None).reward == 1.0


def _records(run: Path) -> list[dict]:
    return [orjson.loads(x) for x in (run / "trajectories.jsonl").read_bytes().splitlines() if x.strip()]


def test_a_starved_check_is_status_error_in_the_run_record_and_resume_regrades_it(
        tmp_path: Path, cli) -> None:
    with starved():
        # the starved checks are the point here: no error budget fails the run
        _, summary = evaluate(ARITH, ReferencePolicy(), episodes=2, out=tmp_path, verifier="inline",
                              max_error_rate=None)
    first = _records(tmp_path)
    failed = [r for r in first if r["verdict"]["status"] == "error"]
    assert failed and all("timed out" in r["verdict"]["error"] for r in failed), first
    assert summary["verify_errors"] == len(failed), summary  # counted apart, never as a 0
    cli("verify", str(tmp_path))  # `proofgym verify` re-grades too (into verdicts.jsonl)
    regrades = [orjson.loads(x) for x in (tmp_path / "verdicts.jsonl").read_bytes().splitlines()]
    assert [r["verdict"]["reward"] for r in regrades] == [1.0, 1.0], regrades
    _, resumed = evaluate(ARITH, ReferencePolicy(), episodes=2, resume=tmp_path, verifier="inline")
    assert resumed["verify_errors"] == 0 and resumed["mean_reward"] == 1.0, resumed
    every = _records(tmp_path)
    assert len(every) == 2 + len(failed)  # each grading is recorded; the episodes were not re-run
    assert [r["steps"] for r in every[2:]] == [r["steps"] for r in failed]
    standing = load_run(tmp_path).trajectories
    assert len(standing) == 2 and all(t.verdict.scored and t.reward == 1.0 for t in standing)


def _children(pid: int) -> list[int]:
    return [int(c) for task in Path(f"/proc/{pid}/task").iterdir()
            for c in (task / "children").read_text().split()]


def test_a_starved_check_in_the_process_pool_is_an_error_verdict() -> None:
    task = make_task(5)

    def job() -> VerificationJob:
        return VerificationJob(task, trace(f"\\boxed{{{task.answer}}}"), Artifact("inprocess"))

    with VerifierPool("process", processes=1, timeout_s=answers.MATH_TIMEOUT_S + 120) as pool:
        assert pool.submit(job(), "warm").result(300).reward == 1.0
        checkers = [c for w in multiprocessing.active_children() for c in _children(w.pid)]
        assert checkers, "the pool worker has no math checker process"
        for pid in checkers:
            os.kill(pid, signal.SIGSTOP)
        try:
            v = pool.submit(job(), "starved").result(300)
        finally:
            for pid in checkers:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
        assert v.status == "error" and "timed out" in v.error and v.grader, v
        assert pool.submit(job(), "after").result(300).reward == 1.0


def test_a_process_forked_after_the_checker_started_checks_without_hanging() -> None:
    """A fork of a process whose math checker runs (a grader worker forked from the pool's
    forkserver, which warmed the checker up) starts its own checker at first use: it must not
    fork from inside the at-fork handler, where another library's lock is still held
    (``concurrent.futures.thread``, imported after the checker: seen as a hung CodeRepair
    grading in a process pool)."""
    import subprocess
    import sys

    code = ("import os\n"
            "import proofgym.verify.graders.answers as answers\n"
            "assert answers.math_equivalent('1/2', '0.5')\n"
            "import concurrent.futures.thread  # its at-fork handler comes after the checker's\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    os._exit(0 if answers.math_equivalent('2', '2.0') else 3)\n"
            "print('child', os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "child 0", done
