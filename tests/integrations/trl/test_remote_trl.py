"""The TRL adapter over a served env: ``environment_factory`` and ``dataset`` take a
``RemoteEnv`` as they take a local env, and the rewards equal the local ones."""

from __future__ import annotations

import functools
import inspect

import pytest

from proofgym import make_env
from proofgym.integrations.trl import (
    EnvironmentReward,
    MultiTurnNotSupported,
    dataset,
    environment_factory,
)
from proofgym.remote import RemoteEnv
from tests.serve_helpers import Served
from tests.trl_fixtures import require_module


@pytest.fixture(scope="module")
def served():
    with Served("proofgym/Arith-v0", "--verifier", "inline") as server:
        yield server


def test_environment_factory_and_dataset_over_a_served_env(served):
    get_json_schema = require_module("transformers.utils").get_json_schema
    remote_env = RemoteEnv(served.url)
    try:
        rows = dataset(remote_env, system_prompt="Be brief.")
    finally:
        remote_env.close()
    assert rows == dataset(make_env("proofgym/Arith-v0"), system_prompt="Be brief.")
    remote_cls = environment_factory(functools.partial(RemoteEnv, served.url))
    local_cls = environment_factory("proofgym/Arith-v0")
    assert inspect.signature(remote_cls.calculator) == inspect.signature(local_cls.calculator)
    assert get_json_schema(remote_cls.calculator) == get_json_schema(local_cls.calculator)
    tasks = make_env("proofgym/Arith-v0").tasks
    rewards, outputs = {}, {}
    for name, cls in (("remote", remote_cls), ("local", local_cls)):
        instances = [cls() for _ in range(3)]
        finals = []
        try:
            for instance, row in zip(instances, rows[:3], strict=True):
                assert instance.reset(**row) is None
                task = tasks.get(row["task_id"])
                call, answer = list(task.reference_solution())
                outputs.setdefault(name, []).append(instance.calculator(**call.tool_input))
                finals.append([{"role": "assistant", "content": answer.message}])
            reward = EnvironmentReward(backend="inline")
            rewards[name] = reward(completions=finals, environments=instances)
            reward.close()
        finally:
            for instance in instances:
                instance._close()
    assert outputs["remote"] == outputs["local"] and len(outputs["remote"]) == 3
    assert rewards["remote"] == rewards["local"] == [1.0, 1.0, 1.0]


def test_a_served_multi_turn_env_is_refused_as_a_local_one_is():
    with Served("proofgym/Guess-v0", "--verifier", "inline") as served, \
            pytest.raises(MultiTurnNotSupported, match="multi-turn"):
        environment_factory(functools.partial(RemoteEnv, served.url))
