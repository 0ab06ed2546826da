"""Gymnasium and client conformance found while building the TRL integration (issue 12).

Each test failed before its fix: async vector envs with shared memory, per-env grading of a
vector env, and the scripted server's streaming, ``n``, ``models.retrieve`` and unknown models.
"""

from __future__ import annotations

import copy

import gymnasium
import openai
import pytest

import proofgym  # noqa: F401 - registers the bundled envs
from proofgym.core import ToolCallAction, TraceStep, TurnCompleteAction
from proofgym.verify.pool.vector import verify_vector

PERCENT_TASK = "arith-l2-s0-00001"  # its prompt has a '%' (Gymnasium's Text charset has none)


def _play(vec, actions_per_env):
    """Step every env through its actions (scripts of equal length: a vector env resets an env
    at the step after its episode ends); returns each env's trace."""
    traces = [[] for _ in actions_per_env]
    for actions in zip(*actions_per_env, strict=True):
        obs, *_ = vec.step(actions)
        for i, action in enumerate(actions):
            traces[i].append(TraceStep(action, {k: (v[i] if k != "turn" else int(v[i]))
                                                for k, v in copy.deepcopy(obs).items()}))
    return traces


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_make_vec_with_shared_memory_returns_the_real_text(mode):
    # Gymnasium's default for async is shared_memory=True
    vec = gymnasium.make_vec("proofgym/Arith-v0", num_envs=2, vectorization_mode=mode)
    single = gymnasium.make("proofgym/Arith-v0").unwrapped
    try:
        obs, _ = vec.reset(options={"task_id": PERCENT_TASK})
        prompt = single.tasks.get(PERCENT_TASK).get_spec().prompt
        assert "%" in prompt
        assert tuple(obs["observation"]) == (prompt, prompt) and tuple(obs["type"]) == ("turn_init",) * 2
        weird = "100 % sûr, 中文, emoji 🚀, tab\t"
        obs, *_ = vec.step((ToolCallAction("calculator", {"expression": "5 % 2"}),
                            TurnCompleteAction(weird)))
        assert tuple(obs["type"]) == ("tool_error", "episode_end")
        assert obs["observation"][0] == "operator Mod is not supported; use + - * / ^"
        assert obs["observation"][1] == ""
    finally:
        vec.close()
        single.close()


def test_make_vec_async_guess_observations_are_not_padding():
    vec = gymnasium.make_vec("proofgym/Guess-v0", num_envs=2, vectorization_mode="async")
    try:
        obs, _ = vec.reset(seed=0)
        assert all(o.startswith("I am thinking of an integer") for o in obs["observation"])
        obs, *_ = vec.step((TurnCompleteAction("x"), TurnCompleteAction("still no number")))
        assert tuple(obs["observation"]) == ("Please reply with exactly one integer between 1 and 100.",) * 2
    finally:
        vec.close()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_verify_vector_grades_each_env_with_its_own_trace(mode):
    vec = gymnasium.make_vec("proofgym/Arith-v0", num_envs=3, vectorization_mode=mode)
    single = gymnasium.make("proofgym/Arith-v0").unwrapped
    task = single.tasks.get(PERCENT_TASK)
    scripts = [
        [ToolCallAction("calculator", {"expression": task.expression}),
         TurnCompleteAction(f"\\boxed{{{task.answer}}}")],
        [ToolCallAction("calculator", {"expression": "1+1"}),
         TurnCompleteAction(f"\\boxed{{{task.wrong_answer}}}")],
        [ToolCallAction("calculator", {"expr": "1"}),  # malformed: an error observation
         TurnCompleteAction(f"\\boxed{{{task.answer}}}")],
    ]
    try:
        vec.reset(options={"task_id": PERCENT_TASK})
        traces = _play(vec, scripts)
        assert traces[2][0].observation["type"] == "tool_error"
        verdicts = verify_vector(vec, traces)
        assert [v.reward for v in verdicts] == [1.0, 0.0, 1.0]
        assert [v.metrics["used_calculator"] for v in verdicts] == [1.0, 1.0, 1.0]
        # the same as grading each episode alone
        for script, verdict in zip(scripts, verdicts, strict=True):
            single.reset(options={"task_id": PERCENT_TASK})
            steps = [TraceStep(a, single.step(a)[0]) for a in script]
            assert single.verify(steps) == verdict
        with pytest.raises(ValueError, match="one trace per env"):
            verify_vector(vec, traces[:2])
    finally:
        vec.close()
        single.close()


# ------------------------------------------------------------------ the scripted server
def _arith_server(**kwargs):
    from proofgym.envs.arith import make_env
    from proofgym.testing import ReferenceScript, ScriptedServer

    env = make_env(n_tasks=4)
    return env.tasks[0], ScriptedServer(ReferenceScript(env.tasks), model="m1", **kwargs)


def test_scripted_server_streams_tool_calls_and_text_to_the_raw_openai_sdk():
    task, server = _arith_server(reasoning=True)
    prompt = [{"role": "user", "content": task.get_spec().prompt}]
    with server:
        client = openai.OpenAI(base_url=server.base_url, api_key="x")
        plain = client.chat.completions.create(model="m1", messages=prompt)
        stream = client.chat.completions.create(model="m1", messages=prompt, stream=True,
                                                stream_options={"include_usage": True})
        chunks = list(stream)
        call = plain.choices[0].message.tool_calls[0]
        # reassemble the streamed tool call the way SDK users do
        name = "".join(c.choices[0].delta.tool_calls[0].function.name or "" for c in chunks
                       if c.choices and c.choices[0].delta.tool_calls)
        arguments = "".join(c.choices[0].delta.tool_calls[0].function.arguments or "" for c in chunks
                            if c.choices and c.choices[0].delta.tool_calls)
        assert (name, arguments) == (call.function.name, call.function.arguments) == (
            "calculator", f'{{"expression":"{task.expression}"}}')
        finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
        assert finishes == ["tool_calls"] and chunks[-1].usage.total_tokens == plain.usage.total_tokens
        # the final answer, streamed as text pieces
        followup = [*prompt, plain.choices[0].message.model_dump(exclude_none=True),
                    {"role": "tool", "tool_call_id": call.id, "content": task.answer}]
        text_chunks = list(client.chat.completions.create(model="m1", messages=followup, stream=True))
        text = "".join(c.choices[0].delta.content or "" for c in text_chunks if c.choices)
        whole = client.chat.completions.create(model="m1", messages=followup).choices[0].message.content
        assert text == whole and f"\\boxed{{{task.answer}}}" in text
        assert sum(bool(c.choices and c.choices[0].delta.content) for c in text_chunks) > 1


def test_scripted_server_n_choices_models_retrieve_and_unknown_models():
    task, server = _arith_server()
    prompt = [{"role": "user", "content": task.get_spec().prompt}]
    with server:
        client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        three = client.chat.completions.create(model="m1", messages=prompt, n=3)
        assert [c.index for c in three.choices] == [0, 1, 2]
        assert len({c.message.tool_calls[0].function.arguments for c in three.choices}) == 1
        streamed = list(client.chat.completions.create(model="m1", messages=prompt, n=2, stream=True))
        assert {c.choices[0].index for c in streamed if c.choices} == {0, 1}
        assert client.models.retrieve("m1").id == "m1"
        with pytest.raises(openai.NotFoundError, match="does not exist"):
            client.models.retrieve("gpt-nope")
        with pytest.raises(openai.NotFoundError, match="does not exist"):
            client.chat.completions.create(model="gpt-nope", messages=prompt)
        with pytest.raises(openai.BadRequestError, match="n must be"):
            client.chat.completions.create(model="m1", messages=prompt, n=0)
