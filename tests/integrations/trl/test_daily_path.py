"""Issue 24, the TRL page's claims: the single-turn helpers refuse held-out tasks, an instance
closes without a private call, and a sandboxed env refuses pickling by name."""

from __future__ import annotations

import copy
import pickle

import gymnasium
import pytest

from proofgym.integrations.trl import ProofgymReward, close_environment, environment_factory, prompt_dataset
from proofgym.make import make_env
from proofgym.tasks import HeldOutError


def _arith():
    return gymnasium.make("proofgym/Arith-v0", n_tasks=40, use_calculator=False).unwrapped


def test_prompt_dataset_gives_the_train_split_and_refuses_heldout_ids() -> None:
    env = _arith()
    train = env.tasks.manifest.pool("train")
    heldout = env.tasks.manifest.pool("heldout")
    assert train and heldout
    assert [r["task_id"] for r in prompt_dataset(env)] == train
    with pytest.raises(HeldOutError, match=heldout[0]):
        prompt_dataset(env, task_ids=[train[0], heldout[0]])
    assert len(prompt_dataset(env, task_ids=heldout, allow_heldout=True)) == len(heldout)
    assert len(prompt_dataset(env, allow_heldout=True)) == 40


def test_proofgym_reward_refuses_a_heldout_task_before_grading() -> None:
    env = _arith()
    heldout = env.tasks.get(env.tasks.manifest.pool("heldout")[0])
    train = env.tasks.get(env.tasks.manifest.pool("train")[0])
    reward = ProofgymReward(env, backend="inline")
    try:
        with pytest.raises(HeldOutError, match=heldout.id):
            reward(completions=[f"\\boxed{{{train.answer}}}", f"\\boxed{{{heldout.answer}}}"],
                   task_id=[train.id, heldout.id])
        assert reward.last_verdicts == []  # nothing was graded
        assert reward(completions=[f"\\boxed{{{train.answer}}}"], task_id=[train.id]) == [1.0]
    finally:
        reward.close()
    spending = ProofgymReward(env, backend="inline", allow_heldout=True)
    try:
        assert spending(completions=[f"\\boxed{{{heldout.answer}}}"], task_id=[heldout.id]) == [1.0]
    finally:
        spending.close()


def test_close_environment_closes_an_instance_and_is_no_tool() -> None:
    cls = environment_factory("proofgym/Arith-v0", n_tasks=8)
    instance = cls()
    assert not hasattr(instance, "close")  # TRL would offer a public close() to the model
    close_environment(instance)
    assert instance._closed
    close_environment(instance)  # idempotent


def test_a_sandboxed_env_refuses_pickling_by_name() -> None:
    env = make_env("proofgym/CodeRepair-v0")
    try:
        for clone in (pickle.dumps, copy.deepcopy):
            with pytest.raises(TypeError, match=r"sandboxed env .* does not pickle or copy"):
                clone(env)
    finally:
        env.close()


def test_chat_templates_take_as_function_not_the_tool_itself() -> None:
    """What the page says: transformers (and so GRPOTrainer(tools=)) takes only real functions."""
    from tests.trl_fixtures import require_module

    require_module("transformers")
    from proofgym.envs.arith.calculator import calculator
    from tests.trl_tiny import tiny_tokenizer

    tokenizer = tiny_tokenizer()
    messages = [{"role": "user", "content": "6 * 7?"}]
    with pytest.raises(ValueError, match="callable function with type hints"):
        tokenizer.apply_chat_template(messages, tools=[calculator], tokenize=False)
    text = tokenizer.apply_chat_template(messages, tools=[calculator.as_function()], tokenize=False)
    assert '"name": "calculator"' in text and "expression" in text
