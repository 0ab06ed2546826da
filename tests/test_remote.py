"""Acceptance 2: ``RemoteEnv`` over ``proofgym serve`` is the local env: check_env passes, and
100 Arith episodes through it equal the local run record for record (ids, observations,
verdicts); it works through ``proofgym eval --env-url`` and ``gymnasium.make_vec``."""

from __future__ import annotations

import functools

import gymnasium
import orjson
import pytest
from gymnasium.utils.env_checker import check_env

from proofgym import ToolCallAction, TurnCompleteAction, make_env
from proofgym.core import EpisodeStateError
from proofgym.eval import evaluate
from proofgym.remote import RemoteEnv, RemoteError
from proofgym.rollout.openai_policy import OpenAIPolicy
from proofgym.testing import ReferenceScript, ScriptedServer
from proofgym.verify.pool import VerifierPool
from tests.serve_helpers import Served

ENV = "proofgym/Arith-v0"
#: What must be equal record for record (timings, the artifact and the grader pool's own
#: description are the host's: the remote artifact stays on the server)
SAME = ("trajectory_id", "env_id", "task_id", "task_hash", "seed", "policy", "prompt", "tools",
        "terminated", "truncated", "truncation_reason", "verdict", "reward", "status", "error",
        "contract_id", "split")


@pytest.fixture(scope="module")
def served():
    with Served(ENV, "--verifier", "inline") as server:
        yield server


@pytest.fixture(scope="module")
def training():
    """A training server: it serves (and samples from) the train split only."""
    with Served(ENV, "--verifier", "inline", "--split", "train") as server:
        yield server


def _local_training_env():
    env = make_env(ENV)
    env.tasks = env.tasks.split("train")
    return env


@pytest.fixture(scope="module")
def model():
    with ScriptedServer(ReferenceScript(make_env(ENV).tasks)) as server:
        yield server


def test_remote_env_passes_check_env_and_renders(training):
    env = RemoteEnv(training.ws_url, render_mode="ansi")
    try:
        check_env(env)
        obs, info = env.reset(seed=5)
        assert obs["type"] == "turn_init" and info["tools"][0]["function"]["name"] == "calculator"
        env.step(TurnCompleteAction("\\boxed{0}"))
        assert "assistant: \\boxed{0}" in env.render()
        with pytest.raises(EpisodeStateError):
            env.step(TurnCompleteAction("again"))  # as the local env: after the end, reset first
    finally:
        env.close()


def test_remote_env_steps_equal_local_for_the_same_seeds(training):
    remote, local = RemoteEnv(training.url), _local_training_env()
    try:
        for seed in (0, 1, 2, 3):
            assert remote.reset(seed=seed) == local.reset(seed=seed)
            assert remote.current_task.id == local.current_task.id
            for action in (ToolCallAction("calculator", {"expression": "2*(3+4)"}),
                           ToolCallAction("calculator", {"expression": "2*"}),  # a tool error
                           ToolCallAction("no_such_tool", {}), TurnCompleteAction("\\boxed{14}")):
                assert remote.step(action) == local.step(action)
        # seeds continue as locally: a reset without a seed draws from the env's generator
        assert remote.reset() == local.reset()
    finally:
        remote.close()
        local.close()


def _records(path) -> list[dict]:
    return [orjson.loads(line) for line in (path / "trajectories.jsonl").read_bytes().splitlines()]


@pytest.mark.slow
def test_100_arith_episodes_through_remote_env_equal_the_local_run(served, model, tmp_path):
    runs = {}
    for name, factory in (("local", None), ("remote", functools.partial(RemoteEnv, served.ws_url))):
        policy = OpenAIPolicy("scripted", base_url=model.base_url)
        _, summary = evaluate(ENV, policy, episodes=100, split="dev", concurrency=4,
                              verifier="inline", out=tmp_path / name, env_factory=factory)
        assert summary["episodes"] == 100
        runs[name] = sorted(_records(tmp_path / name), key=lambda r: r["trajectory_id"])
    local, remote = runs["local"], runs["remote"]
    assert len(local) == len(remote) == 100
    contracts = [(tmp_path / name / "contract.json").read_bytes() for name in ("local", "remote")]
    assert contracts[0] == contracts[1]
    for a, b in zip(local, remote, strict=True):
        assert {k: a[k] for k in SAME} == {k: b[k] for k in SAME}
        assert [(s["action"], s["observation"], s["info"]) for s in a["steps"]] == \
            [(s["action"], s["observation"], s["info"]) for s in b["steps"]]
    assert {r["status"] for r in remote} == {"ok"} and all(r["reward"] == 1.0 for r in remote)


@pytest.mark.slow
def test_eval_env_url_runs_the_served_env_with_the_local_ids(served, model, tmp_path, cli):
    base = ["--policy", "openai:scripted", "--base-url", model.base_url, "-n", "6", "--split", "dev",
            "-c", "2"]
    cli("eval", ENV, *base, "--out", str(tmp_path / "local"))
    cli("eval", ENV, *base, "--out", str(tmp_path / "remote"), "--env-url", served.ws_url)
    local = sorted(_records(tmp_path / "local"), key=lambda r: r["trajectory_id"])
    remote = sorted(_records(tmp_path / "remote"), key=lambda r: r["trajectory_id"])
    assert [(r["trajectory_id"], r["verdict"]) for r in local] == \
        [(r["trajectory_id"], r["verdict"]) for r in remote]
    wrong = cli("eval", "proofgym/Guess-v0", *base, "--env-url", served.ws_url, check=False)
    assert wrong.returncode == 2 and "serves proofgym/Arith-v0, not proofgym/Guess-v0" in wrong.stderr


def test_a_remote_run_starts_no_grader_worker_and_takes_the_servers_verdicts(served, model, tmp_path):
    """The server returns each verdict with the episode's last step: the client's pool grades
    nothing and starts no worker (red before: evaluate booted the pool, whose workers fetched
    each verdict from /verdicts)."""
    with VerifierPool("process", boot=False) as pool:
        _, summary = evaluate(ENV, OpenAIPolicy("scripted", base_url=model.base_url), episodes=4,
                              split="dev", concurrency=2, verifier=pool, out=tmp_path,
                              env_factory=functools.partial(RemoteEnv, served.url))
        assert pool.stats["workers_started"] == 0 and pool.stats["submitted"] == 0
        assert pool.startup_s is None and "verifier_startup_s" not in summary.get("time", {})
    records = _records(tmp_path)
    assert len(records) == 4
    assert all(r["verdict"]["status"] == "scored" and r["reward"] == 1.0 for r in records)
    assert {r["artifact"]["runtime"] for r in records} == {"remote"}


def test_make_vec_builds_remote_envs(served):
    vec = gymnasium.make_vec("proofgym.remote:Remote-v0", num_envs=2, vectorization_mode="sync",
                             url=served.ws_url)
    try:
        obs, _ = vec.reset(seed=[10, 11])
        local = [make_env(ENV).reset(seed=s)[0]["observation"] for s in (10, 11)]
        assert list(obs["observation"]) == local
    finally:
        vec.close()


def test_an_unreachable_server_is_a_clear_error():
    with pytest.raises(RemoteError, match=r"cannot reach the env server at http://127\.0\.0\.1:9"):
        RemoteEnv("ws://127.0.0.1:9")
