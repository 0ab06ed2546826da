"""OpenAIPolicy over real HTTP against the scripted OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from proofgym import (
    InProcessRuntime,
    Limits,
    TaskSet,
    ToolCallAction,
    Trace,
    TurnCompleteAction,
    UniversalVerifiableEnv,
    Verdict,
)
from proofgym.core import ProofgymError
from proofgym.envs.arith import ArithTask, arith_tasks, calculator
from proofgym.errors import RunFailedError
from proofgym.eval import evaluate, make_env, plan_episodes
from proofgym.record import Trajectory
from proofgym.rollout import OpenAIPolicy, Orchestrator
from proofgym.testing import Fault, ReferenceScript, ScriptedServer
from proofgym.verify.pool import VerifierPool

ARITH = "proofgym/Arith-v0"


def arith_server(**kwargs: Any) -> ScriptedServer:
    return ScriptedServer(ReferenceScript(make_env(ARITH).tasks), **kwargs)


@pytest.fixture(params=["openai", "httpx"])
def transport(request: pytest.FixtureRequest) -> str:
    """Both ways a request reaches the server: the openai SDK and the lean httpx client."""
    return request.param


def run_openai(server: ScriptedServer, transport: str, *, episodes: int = 8, concurrency: int = 4,
               **policy_options: Any) -> tuple[list[Trajectory], dict[str, Any]]:
    options = {"timeout_s": 5.0, "backoff_s": 0.01, "transport": transport, **policy_options}
    policy = OpenAIPolicy("scripted", base_url=server.base_url, **options)
    return evaluate(ARITH, policy, episodes=episodes, concurrency=concurrency, verifier="inline")


def run_failed_openai(server: ScriptedServer, transport: str, **options: Any
                      ) -> tuple[list[Trajectory], dict[str, Any]]:
    """A run whose every episode fails: evaluate() fails it as a whole, with the records."""
    with pytest.raises(RunFailedError, match="every episode") as failed:
        run_openai(server, transport, **options)
    return failed.value.trajectories, failed.value.summary


def orchestrate(env_factory: Any, policy: OpenAIPolicy, plan: Any, pool: VerifierPool,
                **options: Any) -> list[Trajectory]:
    async def run() -> list[Trajectory]:
        try:
            return await Orchestrator(env_factory, policy, verifier=pool, **options).run(plan)
        finally:
            await policy.aclose()  # its HTTP client belongs to this event loop

    return asyncio.run(run())


def test_full_eval_through_openai_policy_scores_the_reference_script() -> None:
    with arith_server(record_requests=True) as server:
        policy = OpenAIPolicy("scripted", base_url=server.base_url, version="step-12",
                              system_prompt="You are careful.")
        trajectories, summary = evaluate(ARITH, policy, episodes=12, concurrency=4, verifier="process")
    assert summary["episodes"] == 12 and summary["mean_reward"] == 1.0 and summary["episode_errors"] == 0
    for traj in trajectories:
        assert traj.policy["name"] == "openai" and traj.policy["version"] == "step-12"
        call, answer = traj.steps
        assert isinstance(call.action, ToolCallAction) and call.action.tool_name == "calculator"
        assert call.observation["type"] == "tool_output"
        assert isinstance(answer.action, TurnCompleteAction) and "\\boxed{" in answer.action.message
        for step, finish in ((call, "tool_calls"), (answer, "stop")):
            assert step.usage["finish_reason"] == finish and step.usage["retries"] == 0
            assert step.usage["total_tokens"] == step.usage["prompt_tokens"] + step.usage["completion_tokens"]
            assert step.usage["latency_s"] > 0
    # What went over the wire: system prompt, the task prompt, tools, then the tool result
    # answering the call's id.
    second = next(r for r in server.received if len(r["messages"]) == 4)
    system, user, assistant, tool = second["messages"]
    assert system == {"role": "system", "content": "You are careful."} and user["role"] == "user"
    assert second["tools"][0]["function"]["name"] == "calculator"
    assert tool["role"] == "tool" and tool["tool_call_id"] == assistant["tool_calls"][0]["id"]


def test_rate_limits_are_retried_and_recorded(transport: str) -> None:
    with arith_server(faults=[Fault("429", rate=1.0, attempts=1)]) as server:
        trajectories, summary = run_openai(server, transport)
        assert server.stats["fault_429"] == 16
    assert summary["mean_reward"] == 1.0 and summary["scored"] == 8
    for step in (s for t in trajectories for s in t.steps):
        assert step.usage["retries"] == 1 and "RateLimitError 429" in step.usage["failures"][0]


def test_timeouts_are_retried(transport: str) -> None:
    with arith_server(faults=[Fault("timeout", rate=0.5, attempts=1)], hang_s=3.0) as server:
        trajectories, summary = run_openai(server, transport, timeout_s=0.5)
    retried = [s for t in trajectories for s in t.steps if s.usage["retries"]]
    assert retried and all("APITimeoutError" in s.usage["failures"][0] for s in retried)
    assert summary["mean_reward"] == 1.0


def test_persistent_server_errors_are_infrastructure_errors_never_zero(transport: str) -> None:
    with arith_server(faults=[Fault("500", rate=1.0, attempts=None)]) as server:
        trajectories, summary = run_failed_openai(server, transport, max_retries=2)
        assert server.stats["fault_500"] == 8 * 3  # every episode: first try + 2 retries
    assert summary["episode_errors"] == 8 and summary["scored"] == 0 and summary["mean_reward"] is None
    for traj in trajectories:
        assert traj.status == "error" and traj.reward is None
        assert traj.verdict is not None and traj.verdict.status == "unscored"
        assert "PolicyInfrastructureError" in traj.error and "InternalServerError 500" in traj.error


def test_a_rejected_request_is_not_retried(transport: str) -> None:
    other_tasks = arith_tasks(3, seed=99)  # the server does not know Arith-v0's prompts
    with ScriptedServer(ReferenceScript(other_tasks)) as server:
        trajectories, summary = run_failed_openai(server, transport, episodes=2)
        assert server.stats["requests"] == 2
    assert summary["episode_errors"] == 2
    assert all("BadRequestError 400" in t.error and "not retried" in t.error for t in trajectories)


def test_malformed_tool_call_json_becomes_an_error_observation(transport: str) -> None:
    with arith_server(faults=[Fault("malformed")]) as server:
        trajectories, summary = run_openai(server, transport)
    for traj in trajectories:
        call = traj.steps[0]
        assert isinstance(call.action.tool_input, str) and call.action.tool_input.endswith(",}")
        assert call.observation["type"] == "tool_error" and call.info["error_kind"] == "invalid_arguments"
    assert summary["tool_errors"] == {"invalid_arguments": 8}
    assert summary["mean_reward"] == 1.0  # the answer did not need the calculator's output


def test_length_truncation_is_recorded_and_graded_as_produced(transport: str) -> None:
    with arith_server(faults=[Fault("length")]) as server:
        trajectories, summary = run_openai(server, transport)
    assert summary["episode_errors"] == 0 and summary["scored"] == 8
    for traj in trajectories:
        assert [s.usage["finish_reason"] for s in traj.steps] == ["length", "length"]
        assert traj.steps[0].observation["type"] == "tool_error"  # half a JSON object
        assert "\\boxed{" not in traj.steps[1].action.message


def test_tool_calls_in_text_and_reasoning_are_understood_and_kept(transport: str) -> None:
    with arith_server(tool_call_format="text", reasoning=True, record_requests=True) as server:
        trajectories, summary = run_openai(server, transport)
    assert summary["mean_reward"] == 1.0 and summary["tool_errors"] == {}
    for traj in trajectories:
        call = traj.steps[0].action
        assert call.tool_name == "calculator" and isinstance(call.tool_input, dict)
    follow_up = next(r for r in server.received if len(r["messages"]) == 3)
    assistant, tool = follow_up["messages"][1:]
    assert assistant["reasoning_content"].startswith("Thinking")
    assert assistant["tool_calls"][0]["function"]["name"] == "calculator"
    assert tool["tool_call_id"] == assistant["tool_calls"][0]["id"]


class TwoCallsScript:
    """Answers with two calculator calls in one message, then with the sum of their results."""

    def respond(self, messages: Sequence[Mapping[str, Any]], tools: Any) -> list[Any]:
        results = [m["content"] for m in messages if m["role"] == "tool"]
        if not results:
            return [ToolCallAction("calculator", {"expression": "2 + 3"}),
                    ToolCallAction("calculator", {"expression": "10 * 4"})]
        return [TurnCompleteAction(f"\\boxed{{{sum(int(r) for r in results)}}}")]


def test_several_tool_calls_in_one_message_run_as_consecutive_steps() -> None:
    env = UniversalVerifiableEnv(InProcessRuntime([calculator]), max_turns=1,
                                 tasks=[ArithTask("sum", 1, "What is 5 + 40?", "45", "5 + 40", "46")],
                                 limits=Limits(max_turns=1, max_tokens=100_000))
    with ScriptedServer(TwoCallsScript(), record_requests=True) as server:
        policy = OpenAIPolicy("scripted", base_url=server.base_url)
        with VerifierPool("inline") as pool:
            [traj] = orchestrate(lambda: env, policy, plan_episodes(["sum"]), pool, concurrency=1)
        assert server.stats["completions"] == 2
        tool_messages = [m for m in server.received[1]["messages"] if m["role"] == "tool"]
    first, second, answer = traj.steps
    assert [first.observation["observation"], second.observation["observation"]] == ["5", "40"]
    assert first.usage["tool_calls"] == 2 and second.usage == {"from_previous_call": True}
    assert [m["tool_call_id"] for m in tool_messages] == [first.action.call_id, second.action.call_id]
    assert answer.action == TurnCompleteAction("\\boxed{45}") and traj.reward == 1.0
    assert env.tokens == first.usage["total_tokens"] + answer.usage["total_tokens"]


@dataclass(frozen=True)
class FaultyGraderArith(ArithTask):
    """An Arith task whose grader raises, hangs or kills its process when told to."""

    grader_fault: str = ""
    grading_timeout_s: float | None = None  # set per task here: the pool allows it plus a margin

    def verify(self, trace: Trace, runtime: Any) -> Verdict:
        if self.grader_fault == "raise":
            raise ValueError("grader crashed")
        if self.grader_fault == "hang":
            time.sleep(120)
        if self.grader_fault == "kill":
            os._exit(9)
        return super().verify(trace, runtime)


def test_grader_failures_are_error_verdicts_while_the_rest_of_the_run_scores() -> None:
    base = arith_tasks(12, seed=5)
    faults = {base[2].id: "raise", base[5].id: "hang", base[9].id: "kill"}
    # only the hanging grader runs on the pool's short limit; every other one declares a long
    # grading time (the pool then allows that plus its margin): a worker's first grading starts
    # its math checker and imports this module, which at CI's load took over 6 s (5 of 8 runs
    # next to two busy loops failed so), and what ends these graders is their own fault
    tasks = TaskSet([FaultyGraderArith(**{**t.__dict__, "grader_fault": faults.get(t.id, ""),
                                          "grading_timeout_s": None if faults.get(t.id) == "hang" else 60.0})
                     for t in base])

    def env_factory() -> UniversalVerifiableEnv:
        return UniversalVerifiableEnv(InProcessRuntime([calculator]), max_turns=1, tasks=tasks,
                                      limits=Limits(max_turns=1, max_tool_calls=8))

    with ScriptedServer(ReferenceScript(tasks), latency_s=0.01) as server, \
            VerifierPool("process", processes=2, max_in_flight=8, timeout_s=3.0) as pool:
        policy = OpenAIPolicy("scripted", base_url=server.base_url)
        trajectories = orchestrate(env_factory, policy, plan_episodes(tasks.ids), pool,
                                   concurrency=6)
    assert len(trajectories) == 12 and all(t.status == "ok" for t in trajectories)
    for traj in trajectories:
        kind = faults.get(traj.task_id)
        if kind is None:
            assert traj.verdict.status == "scored" and traj.reward == 1.0, traj.verdict
            continue
        assert traj.verdict.status == "error" and traj.reward is None
        expected = {"raise": "ValueError: grader crashed", "hang": "within the 3 s timeout",
                    "kill": "exit code 9"}[kind]
        assert expected in traj.verdict.error, traj.verdict


def test_scripted_server_answers_models_and_rejects_bad_requests() -> None:
    with arith_server(model="m1") as server:
        models = httpx.get(f"{server.base_url}/models").json()
        bad = httpx.post(f"{server.base_url}/chat/completions", content=b"{not json")
        empty = httpx.post(f"{server.base_url}/chat/completions", json={"model": "m1", "messages": []})
    assert models["data"][0]["id"] == "m1"
    assert bad.status_code == 400 and "bad request" in bad.json()["error"]["message"]
    assert empty.status_code == 400


def test_fault_specs_parse_and_reject_nonsense() -> None:
    assert Fault.parse("429:0.2:1") == Fault("429", 0.2, 1)
    assert Fault.parse("500:1:always") == Fault("500", 1.0, None)
    with pytest.raises(ValueError, match="unknown fault"):
        Fault.parse("503")
    with pytest.raises(ValueError, match="KIND"):
        Fault.parse("429:often")


def test_the_default_transport_is_lean_for_a_self_hosted_server_and_the_sdk_for_openai() -> None:
    assert OpenAIPolicy("m", base_url="http://127.0.0.1:8000/v1").describe()["transport"] == "httpx"
    assert OpenAIPolicy("m", base_url="https://api.openai.com/v1").describe()["transport"] == "openai"
    assert OpenAIPolicy("m").describe()["transport"] == "openai"
    assert OpenAIPolicy("m", base_url="http://h/v1", transport="openai").describe()["transport"] == "openai"
    with pytest.raises(ProofgymError, match="unknown transport"):
        OpenAIPolicy("m", transport="carrier-pigeon")
