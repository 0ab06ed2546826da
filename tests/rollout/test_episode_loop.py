"""Issue 11: one episode loop, one pool that never lends verdicts, every episode delivered."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import gymnasium
import orjson
import pytest

from proofgym import (
    Artifact,
    InProcessRuntime,
    Task,
    TaskSet,
    TaskSpec,
    Trace,
    TurnCompleteAction,
    UniversalVerifiableEnv,
)
from proofgym.env import VerificationJob
from proofgym.errors import ErrorBudgetExceeded, RolloutError
from proofgym.eval import evaluate, make_env, plan_episodes
from proofgym.record import Trajectory
from proofgym.rollout import ControlPolicy, Orchestrator, RandomPolicy, ReferencePolicy, run_episode
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


def sleepy_env(seconds: float = 4.0) -> UniversalVerifiableEnv:
    tasks = TaskSet([SleepyTask(f"sleepy-{i}", seconds) for i in range(2)], name="sleepy")
    return UniversalVerifiableEnv(InProcessRuntime(), max_turns=1, tasks=tasks)


@dataclass(frozen=True)
class SleepyTask(SlowTask):
    def reference_solution(self) -> list[TurnCompleteAction]:
        return [TurnCompleteAction("done")]


gymnasium.register("prooftest/Sleepy-v0", entry_point=sleepy_env)


def test_the_pool_timeout_holds_at_concurrency_one() -> None:
    # every grading ran past the timeout: error verdicts, and evaluate() fails the run on them
    with VerifierPool("process", processes=1, timeout_s=1.0) as pool, \
            pytest.raises(ErrorBudgetExceeded) as failed:
        evaluate("prooftest/Sleepy-v0", ReferencePolicy(), episodes=2, verifier=pool, concurrency=1)
    trajectories, summary = failed.value.trajectories, failed.value.summary
    assert len(trajectories) == 2 and summary["mean_reward"] != 1.0
    assert all(t.verdict.status == "error" and "timeout" in t.verdict.error for t in trajectories)


class FailingSink:
    def __init__(self, fail_at: int) -> None:
        self.fail_at, self.written = fail_at, 0

    def write(self, trajectory: Trajectory) -> None:
        if self.written == self.fail_at:
            raise OSError(28, "No space left on device")
        self.written += 1


@pytest.mark.parametrize(("verifier", "in_slot"), [("inline", False), ("process", False), ("inline", True)])
def test_a_failing_sink_makes_the_run_raise_never_a_short_result(verifier: str, in_slot: bool) -> None:
    env_id = "proofgym/Guess-v0"
    with VerifierPool(verifier) as pool:  # type: ignore[arg-type]
        orchestrator = Orchestrator(lambda: make_env(env_id), ReferencePolicy(), concurrency=4,
                                    verifier=pool, inline_verification=in_slot)
        with pytest.raises(RolloutError, match="No space left"):
            asyncio.run(orchestrator.run(plan_episodes(make_env(env_id).tasks.ids[:20]),
                                         sink=FailingSink(fail_at=7)))


def test_a_failing_on_episode_callback_makes_the_run_raise() -> None:
    def boom(_t: Trajectory) -> None:
        raise ValueError("callback bug")

    with VerifierPool("inline") as pool, pytest.raises(RolloutError, match="callback bug"):
        asyncio.run(Orchestrator(lambda: make_env("proofgym/Guess-v0"), ReferencePolicy(), concurrency=2,
                                 verifier=pool, inline_verification=False).run(
            plan_episodes(["guess-s0-00000"], repeats=6), on_episode=boom))


def test_random_policy_plays_a_distinct_sequence_per_episode(cli, tmp_path) -> None:
    cli("eval", "proofgym/Arith-v0", "--policy", "random", "-c", "2", "-n", "12", "--out", str(tmp_path))
    records = [orjson.loads(x) for x in (tmp_path / "trajectories.jsonl").read_bytes().splitlines()]
    sequences = {orjson.dumps([s["action"] for s in r["steps"]]) for r in records}
    assert len(records) == 12 and len(sequences) == 12


def test_random_policy_is_reproducible_per_episode_whatever_the_slot() -> None:
    def actions(concurrency: int) -> dict[str, bytes]:
        trajectories, _ = evaluate("proofgym/Arith-v0", RandomPolicy(3), episodes=8, verifier="inline",
                                   concurrency=concurrency)
        return {t.trajectory_id: orjson.dumps([s.action.to_dict() for s in t.steps]) for t in trajectories}

    assert actions(1) == actions(3)


def test_run_episode_is_the_orchestrator_at_concurrency_one() -> None:
    env = make_env("proofgym/Arith-v0")
    task = env.tasks[0]
    traj = run_episode(env, ReferencePolicy(), task=task, seed=5)
    assert traj.trajectory_id == f"{task.id}#0" and traj.reward == 1.0
    with VerifierPool("inline", timeout_s=0.5) as pool:
        slow = run_episode(sleepy_env(3.0), ReferencePolicy(), task_id="sleepy-0", verifier=pool)
    assert slow.verdict.status == "error" and "timeout" in slow.verdict.error


def test_a_run_builds_its_task_set_once_and_shares_it_across_slots(monkeypatch) -> None:
    from proofgym.envs import arith

    built = []
    real = arith.arith_tasks

    def counting(*args: Any, **kwargs: Any) -> Any:
        built.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(arith, "arith_tasks", counting)
    _, summary = evaluate("proofgym/Arith-v0", ReferencePolicy(), episodes=16, concurrency=8,
                          verifier="inline")
    assert summary["episodes"] == 16 and summary["mean_reward"] == 1.0
    assert len(built) == 1


def test_cli_grader_timeout_is_honoured_at_concurrency_one(tmp_path) -> None:
    import subprocess
    import sys

    from tests.conftest import REPO

    code = ("import sys, tests.rollout.test_episode_loop\n"  # registers prooftest/Sleepy-v0 (a 4 s grader)
            "from proofgym.cli.main import main\n"
            f"sys.argv = ['proofgym', 'eval', 'prooftest/Sleepy-v0', '-n', '2', '--grader-timeout', '1',"
            f" '--out', {str(tmp_path / 'run')!r}]\n"
            "main()\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                          timeout=300, env={**__import__("os").environ, "PYTHONPATH": str(REPO)})
    summary = orjson.loads((tmp_path / "run" / "summary.json").read_bytes())
    assert summary["concurrency"] == 1 and summary["episodes"] == 2, proc.stdout + proc.stderr
    assert summary["mean_reward"] != 1.0 and summary["verify_errors"] == 2


def test_the_synchronous_door_delivers_to_an_in_memory_sink_and_a_recording_numbers_attempts() -> None:
    """``play_plan`` (the one synchronous door) hands each trajectory to its sink as it returns it;
    a :class:`Recording` without a sink plans each new episode as the next attempt at its task,
    with the derived id, the policy version and its age against the newest version seen."""
    from proofgym.rollout.episode import play_plan
    from proofgym.rollout.recorder import EpisodePlan, MemorySink
    from proofgym.rollout.recording import Recording

    env = make_env("proofgym/Arith-v0")
    try:
        ids = env.tasks.ids[:2]
        sink = MemorySink()
        got = play_plan(env, ReferencePolicy(), [EpisodePlan(t, 0, 1) for t in ids], sink=sink)
        assert [t.trajectory_id for t in sink.trajectories] == [t.trajectory_id for t in got]
        assert [t.trajectory_id for t in got] == [f"{t}#0" for t in ids]
        assert all(t.reward == 1.0 for t in got)

        recording = Recording(MemorySink(), env_id="proofgym/Arith-v0", policy={"name": "served"})
        recorders = []
        for version in (5, 7, 6):
            _obs, info = env.reset(options={"task_id": ids[0]})
            recorders.append(recording.begin(env, info, policy_version=version))
        assert [r.trajectory_id for r in recorders] == [f"{ids[0]}#{n}" for n in range(3)]
        for r in recorders:
            recording.deliver(r, None)
        delivered = recording.sink.trajectories
        assert [t.policy["version"] for t in delivered] == ["5", "7", "6"]
        assert [t.extra["age"] for t in delivered] == [2, 0, 1]
    finally:
        env.close()
