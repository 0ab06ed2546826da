"""SearchQA-v0 as a user runs it: the Gymnasium contract, the CLI, and a model over HTTP."""

from __future__ import annotations

import warnings

import gymnasium
import orjson
from gymnasium.utils.env_checker import check_env

import proofgym  # noqa: F401  (registers the bundled environments)
from proofgym.eval import make_env
from proofgym.testing import ReferenceScript, ScriptedServer
from tests.conftest import run_cli

FAULT_METRICS = {"faults_met", "faults_recovered", "fault_timeout", "fault_rate_limited",
                 "fault_server_error", "fault_truncated", "fault_stale", "searches", "pages_read",
                 "windows_read", "answer_page", "found_after_first_page"}


def test_check_env_passes_and_sampled_actions_never_raise():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env = gymnasium.make("proofgym/SearchQA-v0")
        check_env(env.unwrapped)
    assert [str(w.message) for w in caught] == []
    env.action_space.seed(0)
    env.reset(seed=0)
    kinds = set()
    for _ in range(500):
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        assert reward == 0.0 and env.observation_space.contains(obs)
        kinds.add(info.get("error_kind"))
        if terminated or truncated:
            env.reset()
    assert "unknown_tool" in kinds or "invalid_arguments" in kinds


def test_eval_reference_scores_one_under_realistic_faults_and_reports_them(tmp_path):
    out = tmp_path / "run"
    proc = run_cli("eval", "proofgym/SearchQA-v0", "--split", "dev", "--policy", "reference",
                   "--out", str(out))
    summary = orjson.loads((out / "summary.json").read_bytes())
    assert summary["episodes"] >= 40 and summary["mean_reward"] == 1.0
    assert set(summary["metrics"]) >= FAULT_METRICS
    assert summary["metrics"]["faults_met"] > 0
    assert summary["metrics"]["faults_recovered"] == summary["metrics"]["faults_met"]
    assert summary["metrics"]["found_after_first_page"] > 0
    assert set(summary["tool_errors"]) <= {"timeout", "rate_limited", "server_error", "not_found"}
    assert summary["tool_errors"]
    assert "faults_met" in proc.stdout


def test_eval_a_control_scores_zero(tmp_path):
    out = tmp_path / "guess"
    run_cli("eval", "proofgym/SearchQA-v0", "-n", "20", "--policy", "control:guess", "--out", str(out))
    summary = orjson.loads((out / "summary.json").read_bytes())
    assert summary["episodes"] == 20 and summary["mean_reward"] == 0.0


def test_eval_a_model_over_http_through_the_faults(tmp_path):
    tasks = make_env("proofgym/SearchQA-v0").tasks
    with ScriptedServer(ReferenceScript(tasks)) as server:
        run_cli("eval", "proofgym/SearchQA-v0", "--split", "dev", "-n", "12", "--policy",
                "openai:scripted", "--base-url", server.base_url, "--concurrency", "2",
                "--out", str(tmp_path))
    summary = orjson.loads((tmp_path / "summary.json").read_bytes())
    assert summary["episodes"] == 12 and summary["mean_reward"] == 1.0
    assert summary["episode_errors"] == 0 and summary["metrics"]["searches"] >= 1
