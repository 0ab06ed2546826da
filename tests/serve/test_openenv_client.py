"""Acceptance 1: OpenEnv's own client (the ``openenv`` package from PyPI, unchanged) plays
Arith-v0 and CodeRepair-v0 episodes against ``proofgym serve``; the verdicts equal local ones."""

from __future__ import annotations

import re
from urllib.parse import quote

import httpx
import pytest

from proofgym import make_env
from proofgym.rollout.policies import ScriptRunner
from proofgym.serve.session import SERVED_POLICY
from proofgym.wire import encode_action
from tests.conftest import require_tool
from tests.serve_helpers import Served
from tests.training_runs import check_training_run


def GenericEnvClient(**kwargs):
    """OpenEnv's client, imported when a test uses it: importing it loads OpenEnv's server side
    too (gradio: ~3 s), which at module level every pytest-xdist worker would pay collecting."""
    from openenv import GenericEnvClient as client

    return client(**kwargs)


GRADE = ("reward", "status", "components", "metrics", "grader", "failed_gates")


def _local(env_id: str, task_id: str, seed: int, script_of) -> tuple[list, dict]:
    """Play ``script_of(task)`` locally: the observations and the verdict."""
    env = make_env(env_id)
    try:
        obs, _ = env.reset(seed=seed, options={"task_id": task_id})
        runner = ScriptRunner(script_of(env.current_task))
        trace, seen = [], [obs]
        while True:
            action = runner.next(obs)
            obs, _r, terminated, truncated, _info = env.step(action)
            trace.append({"action": action, "obs": obs})
            seen.append(obs)
            if terminated or truncated:
                return seen, env.verify(trace).to_dict()
    finally:
        env.close()


def _served(client, env_id: str, task_id: str, seed: int, script_of,
            **reset: object) -> tuple[list, float | None, str]:
    """Play the same script through OpenEnv's client: observations, OpenEnv reward, episode id."""
    tasks = make_env(env_id).tasks
    result = client.reset(seed=seed, options={"task_id": task_id}, **reset)
    runner = ScriptRunner(script_of(tasks.get(task_id)))
    seen = [result.observation]
    while not result.done:
        result = client.step(encode_action(runner.next(result.observation)))
        seen.append(result.observation)
    return seen, result.reward, result.metadata["episode_id"]


def _train_ids(env_id: str, n: int) -> list[str]:
    tasks = make_env(env_id).tasks
    return [t for t in tasks.ids if tasks.split_of(t) == "train"][:n]


def _grade(verdict: dict) -> dict:
    """The grade, less the grader's own timings (``*_s`` metrics: the host's, not the grade)."""
    out = {k: verdict[k] for k in GRADE}
    out["metrics"] = {k: v for k, v in verdict["metrics"].items() if not k.endswith("_s")}
    return out


def _untimed(observations: list) -> list:
    """The observations with pytest's run time ("6 passed in 0.03s") taken out: it is the
    host's, not the env's."""
    return [{**o, "observation": re.sub(r" in \d+\.\d+s", " in Ts", o["observation"])}
            for o in observations]


def _reference(task):
    return task.reference_solution()


def _wrong(task):
    return task.controls()["known_wrong"]


@pytest.fixture(scope="module")
def arith(tmp_path_factory):
    record = tmp_path_factory.mktemp("served") / "run"
    with Served("proofgym/Arith-v0", "--verifier", "inline", "--record", str(record)) as served:
        served.record = record
        yield served


def test_openenv_client_plays_arith_and_the_verdicts_equal_local(arith):
    """...and ``serve --record DIR`` wrote them down: the run directory's verdicts are the rewards
    OpenEnv's client received, with the policy version each reset named and its age."""
    served = arith
    rewards, versions, ages = {}, {}, {}
    with GenericEnvClient(base_url=served.url).sync() as client:
        for i, task_id in enumerate(_train_ids("proofgym/Arith-v0", 4)):
            for script in (_reference, _wrong):
                # the trainer's step: the last episode is one sampled 3 steps before the newest
                last = len(rewards) == 7
                version, age = (3, 6 - 3) if last else (len(rewards), 0)
                local_obs, local_verdict = _local("proofgym/Arith-v0", task_id, i, script)
                obs, reward, episode = _served(client, "proofgym/Arith-v0", task_id, i, script,
                                               policy_version=version)
                assert obs == local_obs
                # OpenEnv's reward on the last step is the verdict's
                assert reward == local_verdict["reward"]
                record = httpx.get(f"{served.url}/verdicts/{quote(episode, safe='')}").json()
                assert record["status"] == "scored" and record["task_id"] == task_id
                assert {k: record["verdict"][k] for k in GRADE} == {k: local_verdict[k] for k in GRADE}
                assert reward == (1.0 if script is _reference else 0.0)
                rewards[episode], versions[episode], ages[episode] = reward, str(version), age
    check_training_run(served.record, rewards, versions, ages, SERVED_POLICY["versioned_by"])


def test_openenv_client_errors_are_openenv_error_frames(arith):
    with GenericEnvClient(base_url=arith.url).sync() as client:
        with pytest.raises(RuntimeError, match="code: EXECUTION_ERROR"):
            client.step({"message": "too early"})  # before any reset
        client.reset(seed=1)
        with pytest.raises(RuntimeError, match="code: VALIDATION_ERROR"):
            client.step({"nonsense": 1})
        # the session goes on after an error
        assert client.step({"message": "\\boxed{1}"}).done


@pytest.mark.slow
@pytest.mark.sandbox
def test_openenv_client_plays_code_repair_and_the_verdicts_equal_local():
    require_tool("bwrap")
    with Served("proofgym/CodeRepair-v0", "--verifier", "inline") as served, \
            GenericEnvClient(base_url=served.url, message_timeout_s=300).sync() as client:
        task_id = _train_ids("proofgym/CodeRepair-v0", 1)[0]
        controls = make_env("proofgym/CodeRepair-v0").tasks.get(task_id).controls()
        control = sorted(controls)[0]
        for script in (_reference, lambda task: task.controls()[control]):
            local_obs, local_verdict = _local("proofgym/CodeRepair-v0", task_id, 0, script)
            obs, reward, episode = _served(client, "proofgym/CodeRepair-v0", task_id, 0, script)
            assert _untimed(obs) == _untimed(local_obs)
            assert reward == local_verdict["reward"]
            record = httpx.get(f"{served.url}/verdicts/{quote(episode, safe='')}").json()
            assert _grade(record["verdict"]) == _grade(local_verdict)
        assert local_verdict["reward"] == 0.0  # the control fails; the reference passed above


def test_schema_and_metadata_have_openenv_shapes(arith):
    from openenv.core.env_server.types import EnvironmentMetadata, SchemaResponse

    schema = SchemaResponse(**httpx.get(f"{arith.url}/schema").json())  # OpenEnv's own models
    assert schema.action["anyOf"][0]["properties"]["tool_name"]["enum"] == ["calculator"]
    metadata = EnvironmentMetadata(**httpx.get(f"{arith.url}/metadata").json())
    assert metadata.name == "proofgym/Arith-v0"
    health = httpx.get(f"{arith.url}/health").json()
    assert health["status"] == "healthy"
