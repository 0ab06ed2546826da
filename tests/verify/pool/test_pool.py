"""VerifierPool: real worker processes; graders that raise, hang, exit and segfault."""

from __future__ import annotations

import asyncio
import ctypes
import os
import pickle
import time
from dataclasses import dataclass
from typing import Any

import pytest

from proofgym import Artifact, Task, TaskSpec, Trace, Verdict
from proofgym.env import VerificationJob
from proofgym.envs.arith import arith_tasks
from proofgym.envs.guess import guess_tasks
from proofgym.verify.pool import VerifierPool


@dataclass(frozen=True)
class ModeTask(Task):
    """A task whose grader misbehaves as told; ``ok`` graders return ``value`` after a short wait."""

    name: str
    mode: str = "ok"
    value: float = 1.0

    @property
    def id(self) -> str:
        return self.name

    def get_spec(self) -> TaskSpec:
        return TaskSpec(f"task {self.name}")

    def verify(self, trace: Trace, runtime: Any) -> float:
        if self.mode == "raise":
            raise RuntimeError("grader bug")
        if self.mode == "hang":
            time.sleep(120)
        if self.mode == "exit":
            os._exit(7)
        if self.mode == "segfault":
            ctypes.string_at(0)
        if self.mode == "pid":
            return float(os.getpid())
        time.sleep(0.05)
        return self.value


def job(name: str, mode: str = "ok", value: float = 1.0) -> VerificationJob:
    return VerificationJob(ModeTask(name, mode, value), Trace(), Artifact("inprocess"))


def test_bundled_tasks_and_jobs_pickle() -> None:
    for task in (arith_tasks(4)[3], guess_tasks(2)[1]):
        assert pickle.loads(pickle.dumps(task)) == task
    restored = pickle.loads(pickle.dumps(job("a", value=0.5)))
    assert restored.run().reward == 0.5


async def test_misbehaving_graders_become_error_verdicts_and_others_are_unaffected() -> None:
    modes = ["ok"] * 6 + ["raise", "hang", "exit", "segfault"] + ["ok"] * 6
    with VerifierPool("process", processes=2, max_in_flight=8, timeout_s=2.0) as pool:
        verdicts = await asyncio.gather(*(
            pool.grade(job(f"t{i}", mode, value=i / 100), f"traj-{i}") for i, mode in enumerate(modes)))
        by_mode = dict(zip(modes, verdicts, strict=True))
        assert by_mode["raise"].status == "error" and "RuntimeError: grader bug" in by_mode["raise"].error
        assert by_mode["hang"].status == "error" and "timeout" in by_mode["hang"].error
        assert by_mode["exit"].status == "error" and "exit code 7" in by_mode["exit"].error
        assert by_mode["segfault"].status == "error" and "SIGSEGV" in by_mode["segfault"].error
        for i, (mode, verdict) in enumerate(zip(modes, verdicts, strict=True)):
            if mode == "ok":
                assert verdict.status == "scored" and verdict.reward == pytest.approx(i / 100), (i, verdict)
        assert pool.stats["worker_deaths"] >= 2 and pool.stats["timeouts"] == 1
        # The pool still works after losing workers.
        after = await pool.grade(job("later", value=0.25), "traj-later")
        assert after.reward == 0.25 and after.status == "scored"


async def test_an_identical_job_in_flight_is_graded_once_and_never_after() -> None:
    with VerifierPool("process", processes=1, max_in_flight=4) as pool:
        first = pool.submit(job("p", "pid"), "traj-1")
        again = pool.submit(job("p", "pid"), "traj-1")
        assert again is first
        verdict = await asyncio.wrap_future(first)
        assert verdict.reward != os.getpid()  # graded in a worker process, not here
        assert pool.stats["submitted"] == 1 and pool.stats["deduplicated"] == 1
        # Resolved: the same job submitted again is graded again (nothing is cached).
        other = await pool.grade(job("p", "pid"), "traj-1")
        assert other.status == "scored" and pool.stats["submitted"] == 2


@dataclass(frozen=True)
class RendezvousTask(Task):
    """Scores 1.0 only if ``parties`` graders are running at the same time (each waits, up to
    10 s, until all have checked in), so it measures concurrency without timing anything."""

    name: str
    directory: str
    parties: int

    @property
    def id(self) -> str:
        return self.name

    def get_spec(self) -> TaskSpec:
        return TaskSpec("rendezvous")

    def verify(self, trace: Trace, runtime: Any) -> float:
        open(os.path.join(self.directory, self.name), "w").close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if len(os.listdir(self.directory)) >= self.parties:
                return 1.0
            time.sleep(0.01)
        return 0.0


async def test_jobs_in_flight_exceed_processes(tmp_path) -> None:
    with VerifierPool("process", processes=2, max_in_flight=16, timeout_s=30) as pool:
        verdicts = await asyncio.gather(*(
            pool.grade(VerificationJob(RendezvousTask(f"r{i}", str(tmp_path), 16), Trace(),
                                       Artifact("inprocess")), f"r{i}") for i in range(16)))
    assert [v.reward for v in verdicts] == [1.0] * 16, "16 waiting graders did not all run at once"


async def test_inline_backend_times_out_and_reports_raises() -> None:
    with VerifierPool("inline", max_in_flight=4, timeout_s=0.5) as pool:
        ok, bad, stuck = await asyncio.gather(pool.grade(job("a", value=0.75), "a"),
                                              pool.grade(job("b", "raise"), "b"),
                                              pool.grade(job("c", "hang"), "c"))
        assert ok == Verdict(0.75, grader="ModeTask@1")
        assert bad.status == "error" and "grader bug" in bad.error
        assert stuck.status == "error" and "abandoned" in stuck.error


def test_unpicklable_job_is_an_error_verdict_not_a_crash() -> None:
    @dataclass(frozen=True)
    class LocalTask(ModeTask):  # defined in a function: pickle cannot find it
        pass

    with VerifierPool("process", processes=1) as pool:
        verdict = pool.submit(VerificationJob(LocalTask("x"), Trace(), Artifact("inprocess")), "x").result(10)
    assert verdict.status == "error" and "cannot be pickled" in verdict.error


def test_closing_resolves_waiting_jobs_as_errors() -> None:
    pool = VerifierPool("process", processes=1, max_in_flight=1, timeout_s=60)
    running = pool.submit(job("slow", "hang"), "slow")
    waiting = pool.submit(job("next"), "next")
    time.sleep(0.5)
    pool.close()
    for future in (running, waiting):
        verdict = future.result(5)
        assert verdict.status == "error" and "closed" in verdict.error
    with pytest.raises(RuntimeError, match="closed"):
        pool.submit(job("late"), "late")


def test_env_verify_with_a_pool_isolates_the_grader() -> None:
    """``env.verify(trace, pool=pool)``: the grader runs in the pool, so one that hangs,
    segfaults or calls ``os._exit`` is an error verdict and this process carries on."""
    from proofgym import TurnCompleteAction
    from tests.faulty_graders import make_env

    reasons = {"hang": "did not finish within the 2 s timeout", "segfault": "SIGSEGV",
               "exit": "exit code 1"}
    with VerifierPool("process", processes=1, timeout_s=30.0) as pool:
        for fault in ("ok", *reasons):
            env = make_env(fault)
            env.reset(seed=0)
            obs, *_ = env.step(TurnCompleteAction("yes"))
            trace = [{"action": TurnCompleteAction("yes"), "obs": obs}]
            started = time.monotonic()
            verdict = env.verify(trace, pool=pool, timeout_s=2.0)
            if fault == "ok":
                assert verdict.status == "scored" and verdict.reward == 1.0
                assert env.verify(trace).reward == 1.0  # without a pool: graded here, as before
            else:
                assert verdict.status == "error" and reasons[fault] in verdict.error, (fault, verdict)
            assert time.monotonic() - started < 60, fault
            env.close()


def test_a_job_of_another_verifier_version_grades_with_that_grader() -> None:
    from proofgym.verify.pool import job_key

    current = VerificationJob(ModeTask("v"), Trace(), Artifact("inprocess"))
    other = VerificationJob(ModeTask("v"), Trace(), Artifact("inprocess"), verifier_version="9")
    assert job_key(current) != job_key(other)  # never share a verdict across versions
    with VerifierPool("process", processes=1) as pool:
        assert pool.grade_sync(current, "v").reward == 1.0
        missing = pool.grade_sync(other, "v")
    assert missing.status == "error" and "has no verifier version '9'" in missing.error
    assert missing.grader == "ModeTask@9"
