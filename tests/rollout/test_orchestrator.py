"""The async orchestrator: every planned episode delivered exactly once, failures contained."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson
import pytest

from proofgym import (
    AgentAction,
    InProcessRuntime,
    Limits,
    Task,
    TaskSet,
    Trace,
    TurnCompleteAction,
    UniversalVerifiableEnv,
    Verdict,
)
from proofgym.envs import guess
from proofgym.eval import JsonlSink, evaluate, plan_episodes
from proofgym.record import Trajectory
from proofgym.rollout import (
    Orchestrator,
    PolicyStep,
    ReferencePolicy,
    ScriptRunner,
    SyncPolicyAdapter,
    is_async_policy,
)
from proofgym.verify.pool import VerifierPool


class AsyncReference:
    """An in-process async policy replaying reference solutions; fails the episodes named in
    ``fail`` halfway, and yields to the event loop at every step (as a model call would)."""

    def __init__(self, fail: set[str] = frozenset(), version: str = "7", *, gather: int = 0) -> None:
        self.fail, self.version = fail, version
        self.concurrent = self.peak = 0
        # gather=n: the first steps wait until n episodes are open at once, so whether the run
        # reaches its concurrency does not depend on how fast the first slots finish (an env
        # whose runtime is cheap runs its steps on the loop, without a thread hand-off)
        self.gather, self.gathered = gather, asyncio.Event()

    def describe(self) -> dict[str, Any]:
        return {"name": "async-reference", "version": self.version}

    async def start_episode(self, task: Task, observation: Mapping[str, Any], info: Mapping[str, Any],
                            action_space: Any) -> _Session:
        return _Session(self, task)


class _Session:
    def __init__(self, policy: AsyncReference, task: Task) -> None:
        self.policy, self.task = policy, task
        self.runner = ScriptRunner(task.reference_solution())
        self.steps = 0
        policy.concurrent += 1
        policy.peak = max(policy.peak, policy.concurrent)
        if policy.peak >= policy.gather:
            policy.gathered.set()

    async def act(self, observation: Mapping[str, Any]) -> PolicyStep:
        await asyncio.sleep(0)
        await self.policy.gathered.wait()
        self.steps += 1
        if self.task.id in self.policy.fail and self.steps == 2:
            raise ConnectionError(f"model died on {self.task.id}")
        return PolicyStep(self.runner.next(observation), {"total_tokens": 3})

    async def aclose(self) -> None:
        self.policy.concurrent -= 1


class ListSink:
    def __init__(self) -> None:
        self.items: list[Trajectory] = []

    def write(self, trajectory: Trajectory) -> None:
        self.items.append(trajectory)

    def close(self) -> None:
        pass


def guess_env() -> Any:
    return guess.make_env(n_tasks=40)


async def test_thousand_episodes_at_concurrency_64_each_delivered_exactly_once() -> None:
    tasks = guess.guess_tasks(40)
    failing = {tasks.ids[3], tasks.ids[17]}
    plan = plan_episodes(tasks.ids, episodes=1000)
    built = Counter[int]()

    def factory() -> Any:
        built[threading.get_ident()] += 1
        return guess_env()

    policy = AsyncReference(fail=failing, gather=64)
    sink = ListSink()
    with VerifierPool("process", processes=2, max_in_flight=64) as pool:
        orchestrator = Orchestrator(factory, policy, concurrency=64, verifier=pool,
                                    env_id="proofgym/Guess-v0", max_awaiting_grades=32)
        results = await orchestrator.run(plan, sink=sink)
    assert sum(built.values()) == 64, "one env per slot, reused across episodes"
    keys = [t.trajectory_id for t in sink.items]
    assert len(keys) == 1000 and len(set(keys)) == 1000
    assert set(keys) == {spec.key for spec in plan}
    assert [t.trajectory_id for t in results] == keys
    errors = [t for t in results if t.status == "error"]
    scored = [t for t in results if t.reward is not None]
    assert len(errors) + len(scored) == 1000
    assert {t.task_id for t in errors} == failing
    assert len(errors) == sum(1 for s in plan if s.task_id in failing)
    for t in errors:
        assert t.verdict is not None and t.verdict.status == "unscored" and t.reward is None
        assert "ConnectionError: model died" in t.error
    assert all(t.reward == 1.0 for t in scored)
    assert all(t.policy == {"name": "async-reference", "version": "7"} for t in results)
    assert orchestrator.counters.done == 1000 and orchestrator.counters.in_flight == 0
    assert orchestrator.counters.awaiting_grades == 0
    assert policy.peak == 64 and policy.concurrent == 0
    # Token usage from the policy is on every step.
    assert all(s.usage == {"total_tokens": 3} for t in scored for s in t.steps)


@dataclass(frozen=True)
class SlowGuessTask(guess.GuessTask):
    """A guess task whose grader takes a while (as a remote test runner would)."""

    def verify(self, trace: Trace, runtime: Any) -> Verdict:
        time.sleep(0.05)
        return super().verify(trace, runtime)


def slow_guess_env() -> UniversalVerifiableEnv:
    tasks = TaskSet(SlowGuessTask(t.task_id, t.secret) for t in guess.guess_tasks(10))
    return UniversalVerifiableEnv(InProcessRuntime([]), max_turns=8, tasks=tasks)


async def test_backpressure_bounds_episodes_awaiting_grades() -> None:
    plan = plan_episodes(guess.guess_tasks(10).ids, episodes=60)
    seen: list[int] = []
    with VerifierPool("process", processes=1, max_in_flight=1) as pool:
        orchestrator = Orchestrator(slow_guess_env, AsyncReference(), concurrency=8, verifier=pool,
                                    max_awaiting_grades=3)

        def watch(_t: Trajectory) -> None:
            seen.append(orchestrator.counters.awaiting_grades)

        results = await orchestrator.run(plan, on_episode=watch)
    assert len(results) == 60 and all(t.reward == 1.0 for t in results)
    assert max(seen) == 3  # graders fell behind, and the queue stopped at its bound


@pytest.mark.parametrize("runtime_threads", [None, 0])
async def test_group_sampling_and_inline_verification(runtime_threads: int | None) -> None:
    tasks = guess.guess_tasks(5)
    plan = plan_episodes(tasks.ids, repeats=4)
    with VerifierPool("inline") as pool:
        orchestrator = Orchestrator(guess_env, ReferencePolicy(), concurrency=6, verifier=pool, group_size=4,
                                    runtime_threads=runtime_threads)
        assert orchestrator.inline_verification
        results = await orchestrator.run(plan)
    groups: dict[str, list[int]] = {}
    for t in results:
        group = t.extra["group"]
        assert group["size"] == 4 and group["id"] == f"{t.task_id}@0"
        groups.setdefault(group["id"], []).append(group["index"])
    assert len(groups) == 5 and all(sorted(v) == [0, 1, 2, 3] for v in groups.values())
    assert all(t.reward == 1.0 and t.policy["name"] == "reference" for t in results)
    assert orchestrator.counters.done == 20


async def test_a_failing_env_reset_is_an_error_record_for_that_episode_only() -> None:
    def factory() -> Any:
        env = guess_env()
        original = env.reset

        def reset(*, seed: int | None = None, options: dict | None = None) -> Any:
            if options and options.get("task_id") == "guess-s0-00002":
                raise OSError("runtime could not start")
            return original(seed=seed, options=options)

        env.reset = reset  # type: ignore[method-assign]
        return env

    plan = plan_episodes(guess.guess_tasks(5).ids, episodes=10)
    with VerifierPool("inline") as pool:
        results = await Orchestrator(factory, ReferencePolicy(), concurrency=3, verifier=pool).run(plan)
    assert len(results) == 10
    broken = [t for t in results if t.status == "error"]
    assert [t.task_id for t in broken] == ["guess-s0-00002"] * 2
    assert "env.reset failed: OSError: runtime could not start" in broken[0].error
    assert all(t.reward == 1.0 for t in results if t.status == "ok")


async def test_token_usage_is_charged_to_the_env_budget() -> None:
    class Chatty:
        def describe(self) -> dict[str, Any]:
            return {"name": "chatty", "version": "1"}

        async def start_episode(self, *args: Any) -> Chatty:
            return self

        async def act(self, observation: Mapping[str, Any]) -> PolicyStep:
            return PolicyStep(TurnCompleteAction("50"), {"total_tokens": 400})

        async def aclose(self) -> None:
            return None

    def factory() -> Any:
        env = guess.make_env(n_tasks=3, max_turns=50)
        env.limits = Limits(max_turns=50, max_tokens=1000)
        return env

    with VerifierPool("inline") as pool:
        results = await Orchestrator(factory, Chatty(), concurrency=2, verifier=pool).run(
            plan_episodes(["guess-s0-00000", "guess-s0-00001"]))
    for t in results:
        assert t.truncated and t.truncation_reason == "tokens"
        assert len(t.steps) == 3  # 400 + 400 + 400 > 1000 after the third answer


def test_evaluate_uses_the_orchestrator_for_concurrency_and_writes_each_episode_once(tmp_path) -> None:
    trajectories, summary = evaluate("proofgym/Guess-v0", ReferencePolicy(), episodes=30, repeats=2,
                                     concurrency=8, verifier="inline", out=tmp_path)
    lines = (tmp_path / "trajectories.jsonl").read_bytes().splitlines()
    records = [orjson.loads(line) for line in lines]
    assert len(records) == 60 == summary["episodes"] == len({r["trajectory_id"] for r in records})
    assert summary["mean_reward"] == 1.0 and summary["concurrency"] == 8
    assert {r["extra"]["group"]["size"] for r in records} == {2}
    assert all(t.timings["verify_s"] >= 0 for t in trajectories)


def test_sync_policies_are_adapted_one_copy_per_episode() -> None:
    adapter = SyncPolicyAdapter(ReferencePolicy())
    assert is_async_policy(adapter) and not is_async_policy(ReferencePolicy())
    assert adapter.describe()["name"] == "reference"

    async def two_sessions() -> tuple[AgentAction, AgentAction]:
        env_a, env_b = guess_env(), guess_env()
        obs_a, info_a = env_a.reset(options={"task_id": "guess-s0-00000"})
        obs_b, info_b = env_b.reset(options={"task_id": "guess-s0-00001"})
        a = await adapter.start_episode(env_a.current_task, obs_a, info_a, env_a.action_space)
        b = await adapter.start_episode(env_b.current_task, obs_b, info_b, env_b.action_space)
        first_a = (await a.act(obs_a)).action
        obs_a2 = env_a.step(first_a)[0]
        second_a = (await a.act(obs_a2)).action
        first_b = (await b.act(obs_b)).action
        assert first_a == first_b == TurnCompleteAction("50")  # b's script is not advanced by a
        return first_a, second_a

    first, second = asyncio.run(two_sessions())
    assert first != second


def test_jsonl_sink_is_a_sink_for_the_orchestrator(tmp_path) -> None:
    sink = JsonlSink(tmp_path)
    with VerifierPool("inline") as pool:
        asyncio.run(Orchestrator(guess_env, ReferencePolicy(), concurrency=2, verifier=pool).run(
            plan_episodes(["guess-s0-00000"], repeats=3), sink=sink))
    sink.close()
    assert len(sink.path.read_bytes().splitlines()) == 3


@pytest.mark.parametrize("bad", [0, -1])
def test_bad_concurrency_is_rejected(bad: int) -> None:
    with pytest.raises(ValueError, match="concurrency"):
        Orchestrator(guess_env, ReferencePolicy(), concurrency=bad, verifier=VerifierPool("inline"))
