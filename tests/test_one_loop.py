"""Issue 11: one episode loop, one pool that never lends verdicts, every episode delivered."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import pytest

from proofgym import Artifact, Task, TaskSpec, Trace
from proofgym.env import VerificationJob
from proofgym.eval import evaluate
from proofgym.rollout import ControlPolicy, ReferencePolicy
from proofgym.verify.pool import VerifierPool


@pytest.mark.parametrize("concurrency", [1, 2])
def test_a_shared_pool_never_lends_one_runs_verdicts_to_another(concurrency: int) -> None:
    with VerifierPool("process", processes=1) as pool:
        _, right = evaluate("proofgym/Arith-v0", ReferencePolicy(), episodes=6, verifier=pool,
                            concurrency=concurrency)
        _, wrong = evaluate("proofgym/Arith-v0", ControlPolicy("known_wrong"), episodes=6,
                            verifier=pool, concurrency=concurrency)
    assert right["mean_reward"] == 1.0
    assert wrong["mean_reward"] == 0.0


@dataclass(frozen=True)
class SlowTask(Task):
    name: str
    seconds: float = 0.3

    @property
    def id(self) -> str:
        return self.name

    def get_spec(self) -> TaskSpec:
        return TaskSpec("slow")

    def verify(self, trace: Trace, runtime: Any) -> float:
        time.sleep(self.seconds)
        return 1.0


async def test_identical_jobs_in_flight_share_a_result_and_nothing_is_kept_after() -> None:
    job = VerificationJob(SlowTask("s"), Trace(), Artifact("inprocess"))
    with VerifierPool("inline") as pool:
        first = pool.submit(job, "a")
        assert pool.submit(job, "b") is first  # identical and in flight: one grading
        assert pool.submit(job, "c", contract_id="other") is not first  # another contract
        await asyncio.wrap_future(first)
        again = pool.submit(job, "a")
        assert again is not first  # resolved jobs are forgotten: graded anew
        assert (await asyncio.wrap_future(again)).reward == 1.0
        assert pool.stats["submitted"] == 3 and pool.stats["deduplicated"] == 1


def test_pool_timeout_exceeds_the_tasks_own_grading_timeout() -> None:
    @dataclass(frozen=True)
    class Patient(SlowTask):
        grading_timeout_s: float = 2.0

    with VerifierPool("inline", timeout_s=0.5) as pool:
        verdict = pool.submit(VerificationJob(Patient("p", 1.0), Trace(), Artifact("inprocess")),
                              "p").result(20)
    assert verdict.status == "scored" and verdict.reward == 1.0
