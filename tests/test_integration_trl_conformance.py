"""Gymnasium and client conformance found while building the TRL integration (issue 12).

Each test failed before its fix: async vector envs with shared memory, per-env grading of a
vector env, and the scripted server's streaming, ``n``, ``models.retrieve`` and unknown models.
"""

from __future__ import annotations

import copy

import gymnasium
import pytest

import proofgym  # noqa: F401 - registers the bundled envs
from proofgym.core import ToolCallAction, TraceStep, TurnCompleteAction
from proofgym.verify.vector import verify_vector

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
