"""One client and one retry policy for the policy and the LLM judge (``proofgym.chat_client``),
against the real scripted OpenAI-compatible HTTP server with injected faults."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from proofgym import Rubric, TurnCompleteAction
from proofgym.chat_client import RetriesExhausted, RetryPolicy, TransportError
from proofgym.core import ConfigError, TraceStep
from proofgym.core.defaults import DEFAULTS
from proofgym.rollout.openai_policy import OpenAIPolicy, PolicyInfrastructureError
from proofgym.testing.server import Fault, ScriptedServer
from proofgym.verify.graders.judge import JudgeError, LLMJudge


class GradeCorrect:
    """A judge model that grades every response correct."""

    def respond(self, messages: Sequence[Mapping[str, Any]], tools: Any) -> list[Any]:
        return [TurnCompleteAction("The response names Paris.\nGRADE: CORRECT")]


def _trace(message: str) -> list[TraceStep]:
    return [TraceStep(TurnCompleteAction(message), {"type": "episode_end"})]


def _judge(server: ScriptedServer, **options: Any) -> LLMJudge:
    return LLMJudge("scripted", base_url=server.base_url, timeout_s=10, backoff_s=0.01, **options)


def test_the_judge_retries_a_transient_500_from_a_real_server() -> None:
    with ScriptedServer(GradeCorrect(), faults=[Fault("500", attempts=1)]) as server:
        judgement = _judge(server, max_retries=2).judge("Capital of France?", "Paris", "Paris")
        assert judgement.score == 1.0
        assert server.stats["fault_500"] == 1 and server.stats["requests"] == 2


def test_the_judge_retries_are_bounded_and_end_in_an_error_verdict() -> None:
    with ScriptedServer(GradeCorrect(), faults=[Fault("500", attempts=None)]) as server:
        judge = _judge(server, max_retries=2)
        with pytest.raises(JudgeError, match=r"failed 3 times \(retried 2x with backoff\); last: "
                                             r"InternalServerError 500"):
            judge.judge("Capital of France?", "Paris", "Paris")
        assert server.stats["requests"] == 3  # the SDK does not retry on top of the policy
        v = Rubric([judge.component("Capital of France?", "Paris")]).score(_trace("Paris"))
        assert v.status == "error" and "InternalServerError 500" in v.errors["judge"]
        assert server.stats["requests"] == 6


def test_the_judge_does_not_retry_what_a_retry_cannot_fix() -> None:
    with ScriptedServer(GradeCorrect(), model="other") as server:  # the judge's model: a 404
        judge = _judge(server, max_retries=3)
        with pytest.raises(JudgeError, match=r"rejected the request \(NotFoundError 404.*not retried"):
            judge.judge("q", "a", "a")
        assert server.stats["requests"] == 1


def test_policy_and_judge_share_one_retry_policy() -> None:
    policy = OpenAIPolicy("m", base_url="http://127.0.0.1:9/v1")
    judge = LLMJudge("m", base_url="http://127.0.0.1:9/v1", max_retries=4)
    assert policy.retry == judge.retry == RetryPolicy()
    assert policy.retry.backoff_s == DEFAULTS.client_backoff_s
    assert policy.retry.max_retries == DEFAULTS.client_max_retries


def test_the_policy_retries_a_transient_500_through_the_same_loop() -> None:
    with ScriptedServer(GradeCorrect(), faults=[Fault("500", attempts=2)]) as server:
        for transport in ("openai", "httpx"):
            policy = OpenAIPolicy("scripted", base_url=server.base_url, backoff_s=0.01, max_retries=2,
                                  transport=transport)

            async def call(policy: OpenAIPolicy = policy, transport: str = transport) -> dict[str, Any]:
                try:
                    # a message per transport: the fault counts tries per distinct request
                    _, usage = await policy.complete([{"role": "user", "content": transport}], None)
                    return usage
                finally:
                    await policy.aclose()

            usage = asyncio.run(call())
            assert usage["retries"] == 2 and usage["failures"][0].startswith("InternalServerError 500")
        assert server.stats["fault_500"] == 4
        policy = OpenAIPolicy("scripted", base_url=server.base_url, backoff_s=0.01, max_retries=1)

        async def exhausted() -> None:
            try:
                await policy.complete([{"role": "user", "content": "again"}], None)
            finally:
                await policy.aclose()

        with pytest.raises(PolicyInfrastructureError, match=r"failed 2 times \(retried 1x"):
            asyncio.run(exhausted())


def test_retry_policy_bounds_backoff_and_honours_retry_after() -> None:
    retry = RetryPolicy(max_retries=3, backoff_s=0.5, max_backoff_s=2.0)
    for attempt, full in ((0, 0.5), (1, 1.0), (2, 2.0), (5, 2.0)):
        assert full / 2 <= retry.delay(attempt) <= full
    assert 1.0 <= retry.delay(0, retry_after=30.0) <= 2.0  # a server's hint, up to the cap
    calls: list[int] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise TransportError("InternalServerError 500: boom", retryable=True)
        return "ok"

    fast = RetryPolicy(max_retries=3, backoff_s=0.0)
    assert fast.call(flaky) == ("ok", 2, ["InternalServerError 500: boom"] * 2)
    with pytest.raises(RetriesExhausted) as caught:
        RetryPolicy(max_retries=1, backoff_s=0.0).call(
            lambda: (_ for _ in ()).throw(TransportError("APITimeoutError: t", retryable=True, timeout=True)))
    assert caught.value.failures == ["APITimeoutError: t"] * 2 and caught.value.last.timeout
    with pytest.raises(ConfigError, match="must be >= 0"):
        RetryPolicy(max_retries=-1)
