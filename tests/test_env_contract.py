"""The Gymnasium contract of UniversalVerifiableEnv, on the bundled envs and small custom tasks."""

from __future__ import annotations

import copy
import warnings

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from proofgym import (
    InProcessRuntime,
    Limits,
    Task,
    TaskSet,
    TaskSpec,
    ToolCallAction,
    TurnCompleteAction,
    UniversalVerifiableEnv,
    tool,
)
from proofgym.core import EpisodeStateError, TaskNotFoundError
from proofgym.envs.arith import calculator
from proofgym.spaces import ToolCallSpace

BUNDLED = ["proofgym/Arith-v0", "proofgym/Guess-v0"]


@pytest.mark.parametrize("env_id", BUNDLED)
def test_check_env_passes_without_any_warning(env_id):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env = gymnasium.make(env_id)
        check_env(env.unwrapped)
        # the passive checker wraps gymnasium.make'd envs: drive it too
        env.reset(seed=3)
        env.step(env.action_space.sample())
    messages = [str(w.message) for w in caught]
    assert messages == []


@pytest.mark.parametrize("env_id", BUNDLED)
def test_ten_thousand_sampled_actions_never_raise(env_id):
    env = gymnasium.make(env_id)
    env.action_space.seed(0)
    obs, _ = env.reset(seed=0)
    kinds: dict[str, int] = {}
    episodes = 0
    for _ in range(10_000):
        action = env.action_space.sample()
        assert env.action_space.contains(action)
        obs, reward, terminated, truncated, info = env.step(action)
        assert reward == 0.0
        assert env.observation_space.contains(obs)
        if obs["type"] == "tool_error":
            kinds[info["error_kind"]] = kinds.get(info["error_kind"], 0) + 1
        if terminated or truncated:
            episodes += 1
            obs, _ = env.reset()
    assert episodes > 100
    assert kinds.get("unknown_tool", 0) > 0
    if env_id == "proofgym/Arith-v0":
        assert kinds.get("invalid_arguments", 0) > 0


@pytest.mark.parametrize(
    ("kind", "expected"),
    [("unknown_tool", "unknown_tool"), ("missing_argument", "invalid_arguments"),
     ("extra_argument", "invalid_arguments"), ("mistyped_argument", "invalid_arguments"),
     ("non_object", "invalid_arguments"), ("invalid_json", "invalid_arguments")],
)
def test_each_malformed_call_is_an_error_observation_and_the_episode_goes_on(kind, expected):
    env = gymnasium.make("proofgym/Arith-v0").unwrapped
    env.reset(seed=1)
    env.action_space.seed(7)
    for _ in range(5):
        action = env.action_space.sample_malformed(kind)
        obs, reward, terminated, truncated, info = env.step(action)
        assert obs["type"] == "tool_error"
        assert info["error_kind"] == expected
        assert obs["observation"]  # a message saying what was wrong
        assert (terminated, truncated, reward) == (False, False, 0.0)
    obs, *_ = env.step(ToolCallAction("calculator", {"expression": "2*21"}))
    assert obs == {"turn": 0, "observation": "42", "type": "tool_output"}


def test_action_space_equality_and_vector_env():
    a = ToolCallSpace([calculator.schema])
    assert a == ToolCallSpace([calculator.schema])
    assert a != ToolCallSpace([])
    vec = gymnasium.vector.SyncVectorEnv([lambda: gymnasium.make("proofgym/Guess-v0")] * 3)
    obs, _ = vec.reset(seed=0)
    assert obs["type"] == ("turn_init",) * 3
    vec.action_space.seed(0)
    for _ in range(20):
        obs, rewards, *_ = vec.step(vec.action_space.sample())
        assert rewards.tolist() == [0.0, 0.0, 0.0]
    vec.close()


def _guess_env(max_turns: int = 8) -> UniversalVerifiableEnv:
    return gymnasium.make("proofgym/Guess-v0", max_turns=max_turns).unwrapped


def test_guess_correct_guess_terminates():
    env = _guess_env()
    env.reset(seed=0, options={"task_id": "guess-s0-00000"})
    secret = env.current_task.secret
    wrong = secret + 1 if secret < 100 else secret - 1
    obs, _, terminated, truncated, info = env.step(TurnCompleteAction(str(wrong)))
    assert obs["type"] == "turn_transition"
    assert obs["observation"] == ("lower" if wrong > secret else "higher")
    assert (terminated, truncated) == (False, False)
    obs, _, terminated, truncated, info = env.step(TurnCompleteAction(f"My guess: {secret}"))
    assert (terminated, truncated) == (True, False)
    assert obs["type"] == "episode_end"
    assert "truncation_reason" not in info
    with pytest.raises(EpisodeStateError, match="reset"):
        env.step(TurnCompleteAction("1"))


def test_guess_running_out_of_turns_truncates():
    env = _guess_env(max_turns=3)
    env.reset(seed=0, options={"task_id": "guess-s0-00001"})
    bad = str(env.current_task.high + 5)
    results = [env.step(TurnCompleteAction(bad)) for _ in range(3)]
    for _, _, terminated, truncated, _ in results[:2]:
        assert (terminated, truncated) == (False, False)
    _, _, terminated, truncated, info = results[2]
    assert (terminated, truncated) == (False, True)
    assert info["truncation_reason"] == "turns"


def test_tool_schemas_shown_are_those_enforced():
    env = gymnasium.make("proofgym/Arith-v0").unwrapped
    _, info = env.reset(seed=0)
    assert env.current_spec.tools == env.runtime.tools.schemas() == info["tools"]
    assert env.action_space.tool_schemas == info["tools"]
    # change the schema in the runtime: the agent is told the new one, and it is enforced
    required = info["tools"][0]["function"]["parameters"]["required"]
    assert required == ["expression"]
    assert env.step(ToolCallAction("calculator", {"expr": "1"}))[4]["error_kind"] == "invalid_arguments"

    class Liar(_EchoTask):
        def get_spec(self):
            return TaskSpec("hi", tools=[{"type": "function", "function": {"name": "fake"}}])

    with pytest.raises(ValueError, match="one source"):
        UniversalVerifiableEnv(InProcessRuntime([calculator])).reset(options={"task": Liar("x")})


def _rollout(env, actions, seed):
    out = []
    obs, info = env.reset(seed=seed)
    out.append(copy.deepcopy((obs, info)))
    for action in actions:
        step = env.step(action)
        out.append(copy.deepcopy(step))
        if step[2] or step[3]:
            break
    return out


@pytest.mark.parametrize("env_id", BUNDLED)
def test_same_seed_and_actions_give_identical_results(env_id):
    env = gymnasium.make(env_id).unwrapped
    env.action_space.seed(11)
    actions = [env.action_space.sample() for _ in range(12)]
    first = _rollout(env, actions, seed=5)
    second = _rollout(gymnasium.make(env_id).unwrapped, actions, seed=5)
    assert first == second
    assert _rollout(env, actions, seed=5) == first  # and on a reused env


class _EchoTask(Task):
    def __init__(self, tid: str):
        self._id = tid

    @property
    def id(self):
        return self._id

    def get_spec(self):
        return TaskSpec(f"task {self._id}")

    def verify(self, trace, runtime):
        return 1.0 if trace.final_message() == self._id else 0.0


@tool
def echo(text: str) -> str:
    """Echo text back.

    Args:
        text: Text.
    """
    return text


def test_reset_needs_a_task_source_and_samples_with_np_random():
    bare = UniversalVerifiableEnv(InProcessRuntime([echo]))
    with pytest.raises(ValueError, match="tasks=TaskSet"):
        bare.reset()
    obs, info = bare.reset(options={"task": _EchoTask("a")})
    assert obs["observation"] == "task a" and info["task_id"] == "a"
    env = UniversalVerifiableEnv(InProcessRuntime([echo]),
                                 tasks=TaskSet([_EchoTask(str(i)) for i in range(50)]))
    picks = [env.reset(seed=s)[1]["task_id"] for s in range(20)]
    assert picks == [env.reset(seed=s)[1]["task_id"] for s in range(20)]
    assert len(set(picks)) > 5
    assert env.reset(options={"task_id": "7"})[1]["task_id"] == "7"
    with pytest.raises(TaskNotFoundError, match="no task '77x'"):
        env.reset(options={"task_id": "77x"})


def test_budgets_truncate_with_their_reason():
    def env_with(**limits):
        return UniversalVerifiableEnv(InProcessRuntime([echo]), max_turns=4, limits=Limits(**limits),
                                      tasks=TaskSet([_EchoTask("t")]))

    env = env_with(max_tool_calls=2)
    env.reset(seed=0)
    for _ in range(2):
        assert env.step(ToolCallAction("echo", {"text": "x"}))[3] is False
    obs, _, terminated, truncated, info = env.step(ToolCallAction("echo", {"text": "x"}))
    assert (terminated, truncated, info["truncation_reason"]) == (False, True, "tool_calls")
    assert "not run" in obs["observation"]

    env = env_with(max_context_chars=100)
    env.reset(seed=0)
    _, _, _, truncated, info = env.step(ToolCallAction("echo", {"text": "y" * 200}))
    assert truncated and info["truncation_reason"] == "context"

    env = env_with(max_tokens=10)
    env.reset(seed=0)
    env.charge(tokens=8)
    assert env.step(ToolCallAction("echo", {"text": "x"}))[3] is False
    env.charge(tokens=8)
    _, _, _, truncated, info = env.step(ToolCallAction("echo", {"text": "x"}))
    assert truncated and info["truncation_reason"] == "tokens"

    env = env_with(max_cost=0.5)
    env.reset(seed=0)
    env.charge(cost=0.75)
    _, _, _, truncated, info = env.step(TurnCompleteAction("t"))
    assert truncated and info["truncation_reason"] == "cost"

    env = env_with(max_wall_time_s=0.0)
    env.reset(seed=0)
    _, _, _, truncated, info = env.step(ToolCallAction("echo", {"text": "x"}))
    assert truncated and info["truncation_reason"] == "wall_time"


def test_infos_and_observations_are_fresh_objects():
    env = gymnasium.make("proofgym/Arith-v0").unwrapped
    _, info1 = env.reset(seed=0)
    info1["tools"][0]["function"]["name"] = "mutated"
    _, info2 = env.reset(seed=0)
    assert info2["tools"][0]["function"]["name"] == "calculator"


def test_step_before_reset_and_bad_action_types_are_clear_errors():
    env = gymnasium.make("proofgym/Arith-v0").unwrapped
    with pytest.raises(EpisodeStateError, match="before reset"):
        env.step(TurnCompleteAction("1"))
    env.reset(seed=0)
    with pytest.raises(TypeError, match="ToolCallAction or TurnCompleteAction"):
        env.step({"tool_name": "calculator"})


def test_observation_space_accepts_any_unicode_text():
    space = gymnasium.make("proofgym/Arith-v0").unwrapped.observation_space
    for text in ["", "中文 😀 עברית \x00 \t", "x" * 100_000]:
        assert space.contains({"turn": 0, "observation": text, "type": "tool_output"})
    assert not space.contains({"turn": 0, "observation": b"bytes", "type": "tool_output"})
    assert not space.contains({"turn": 0, "observation": "x", "type": "made_up"})
    sample = space.sample()
    assert space.contains(sample) and isinstance(sample["observation"], str)
    assert np.issubdtype(type(sample["turn"]), np.integer)
