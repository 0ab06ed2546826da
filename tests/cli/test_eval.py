"""The CLI end to end, as a user runs it (real subprocesses, real files)."""

from __future__ import annotations

import orjson

from proofgym.record import Trajectory


def _read_run(out):
    summary = orjson.loads((out / "summary.json").read_bytes())
    lines = (out / "trajectories.jsonl").read_bytes().splitlines()
    return summary, [Trajectory.from_dict(orjson.loads(line)) for line in lines]


def test_readme_main_command_reference_scores_one(cli, tmp_path):
    out = tmp_path / "run"
    proc = cli("eval", "proofgym/Arith-v0", "-n", "50", "--policy", "reference", "--out", str(out))
    assert "mean_reward" in proc.stdout
    summary, trajs = _read_run(out)
    assert summary["episodes"] == 50 == len(trajs)
    assert summary["mean_reward"] == 1.0
    assert summary["terminated_rate"] == 1.0 and summary["truncated_rate"] == 0.0
    assert summary["verify_errors"] == 0
    assert {t.policy["name"] for t in trajs} == {"reference"}
    assert all(t.task_hash and t.verdict.grader for t in trajs)


def test_random_policy_scores_near_zero_without_exception(cli, tmp_path):
    out = tmp_path / "random"
    cli("eval", "proofgym/Arith-v0", "-n", "200", "--policy", "random", "--out", str(out))
    summary, trajs = _read_run(out)
    assert summary["episodes"] == 200 == len(trajs)
    assert all(t.status == "ok" and t.verdict.status == "scored" for t in trajs)
    assert summary["episode_errors"] == 0 and summary["verify_errors"] == 0
    assert summary["mean_reward"] <= 0.02
    assert summary["tool_errors"].get("invalid_arguments", 0) > 0
    assert abs(summary["terminated_rate"] + summary["truncated_rate"] - 1.0) < 1e-9


def test_guess_eval_and_envs_listing(cli, tmp_path):
    out = tmp_path / "guess"
    cli("eval", "proofgym/Guess-v0", "-n", "30", "--out", str(out))
    summary, _ = _read_run(out)
    assert summary["mean_reward"] == 1.0
    listing = cli("envs").stdout
    assert "proofgym/Arith-v0" in listing and "proofgym/Guess-v0" in listing


def test_bad_policy_is_a_clear_usage_error(cli, tmp_path):
    proc = cli("eval", "proofgym/Arith-v0", "--policy", "gpt", "--out", str(tmp_path), check=False)
    assert proc.returncode == 2
    assert "unknown policy 'gpt'" in proc.stderr
