"""Metrics against hand-computed values."""

from __future__ import annotations

import math

import orjson
import pytest

from proofgym import ToolCallAction, TurnCompleteAction, Verdict
from proofgym.eval import evaluate, summarize
from proofgym.eval.metrics import attempts_by_task, bootstrap_interval, pass_at_k, pass_at_k_table
from proofgym.record import StepRecord, Trajectory
from proofgym.rollout import ReferencePolicy


def traj(task: str, attempt: int, reward: float | None, *, status: str = "ok", verdict_status: str = "scored",
         truncated: str | None = None, steps: list[StepRecord] | None = None,
         timings: dict[str, float] | None = None, components: dict[str, float] | None = None,
         metrics: dict[str, float] | None = None) -> Trajectory:
    if status == "error":
        verdict = Verdict.unscored("episode failed")
    elif verdict_status == "error":
        verdict = Verdict.failed("grader crashed")
    else:
        verdict = Verdict(reward if reward is not None else 0.0, components or {}, metrics or {})
    return Trajectory(
        trajectory_id=f"{task}#{attempt}", env_id="test", task_id=task, task_hash="h", seed=attempt,
        policy={"name": "t"}, prompt="p", tools=[], steps=steps or [],
        terminated=status == "ok" and truncated is None, truncated=truncated is not None,
        truncation_reason=truncated, verdict=verdict, status=status,
        error="boom" if status == "error" else None, timings=timings or {}, extra={"attempt": attempt})


def test_pass_at_k_estimator_matches_hand_computed_values():
    # 1 - C(n-c, k) / C(n, k)
    assert pass_at_k(5, 2, 1) == pytest.approx(1 - 3 / 5)
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)
    assert pass_at_k(5, 2, 3) == pytest.approx(1 - 1 / 10)
    assert pass_at_k(5, 2, 4) == 1.0  # fewer than 4 wrong attempts: any 4 include a right one
    assert pass_at_k(5, 0, 3) == 0.0
    assert pass_at_k(1, 1, 1) == 1.0
    with pytest.raises(ValueError, match="undefined"):
        pass_at_k(2, 1, 3)


def test_pass_at_k_table_averages_over_tasks_and_never_guesses_beyond_attempts():
    trajs = [
        traj("A", 0, 1.0), traj("A", 1, 0.0), traj("A", 2, 0.0),
        traj("B", 0, 1.0), traj("B", 1, 1.0),
        traj("C", 0, 0.0), traj("C", 1, 0.5), traj("C", 2, None, verdict_status="error"),
    ]
    values, tasks = pass_at_k_table(attempts_by_task(trajs))
    assert values["1"] == pytest.approx((1 / 3 + 1 + 0) / 3)
    assert values["2"] == pytest.approx((2 / 3 + 1 + 0) / 3)
    # only A has 3 scored attempts (C's grader error is not a failure)
    assert values["3"] == pytest.approx(1.0) and tasks["3"] == 1
    assert tasks == {"1": 3, "2": 3, "3": 1}
    assert "4" not in values


def test_bootstrap_interval_is_deterministic_and_near_the_normal_approximation():
    assert bootstrap_interval([[0.7]] * 10) == (pytest.approx(0.7), pytest.approx(0.7))
    assert bootstrap_interval([]) is None
    groups = [[1.0]] * 200 + [[0.0]] * 200  # p = 0.5, n = 400: SE = 0.025
    low, high = bootstrap_interval(groups, seed=3)
    assert low == pytest.approx(0.5 - 1.96 * 0.025, abs=0.01)
    assert high == pytest.approx(0.5 + 1.96 * 0.025, abs=0.01)
    assert bootstrap_interval(groups, seed=3) == (low, high)


def test_bootstrap_resamples_tasks_not_attempts():
    # two tasks, 50 attempts each, all-or-nothing per task: the interval must span [0, 1]
    # (resampling attempts would wrongly give a tight interval around 0.5).
    low, high = bootstrap_interval([[1.0] * 50, [0.0] * 50], seed=0)
    assert low == 0.0 and high == 1.0


def test_rates_tool_errors_tokens_time_and_rubric_means():
    calc = ToolCallAction("calculator", {"expression": "1+1"})
    ok_step = StepRecord(calc, {"type": "tool_output", "observation": "2"}, {},
                         usage={"prompt_tokens": 100, "completion_tokens": 10})
    bad_step = StepRecord(calc, {"type": "tool_error", "observation": "bad"},
                          {"error_kind": "invalid_arguments"},
                          usage={"prompt_tokens": 120, "completion_tokens": 5})
    end = StepRecord(TurnCompleteAction("x"), {"type": "episode_end"}, {},
                     usage={"prompt_tokens": 130, "completion_tokens": 20})
    timing = {"policy_s": 1.0, "env_s": 0.5, "verify_s": 0.25, "total_s": 2.0}
    trajs = [
        traj("A", 0, 1.0, steps=[ok_step, bad_step, end], timings=timing,
             components={"correct": 1.0}, metrics={"used_calculator": 1.0}),
        traj("B", 0, 0.0, steps=[ok_step, end], timings=timing,
             components={"correct": 0.0}, metrics={"used_calculator": 0.0}),
        traj("C", 0, 0.0, truncated="turns", timings=timing),
        traj("D", 0, None, status="error"),
    ]
    s = summarize(trajs)
    assert s["episodes"] == 4 and s["scored"] == 3 and s["unscored"] == 1
    assert s["mean_reward"] == pytest.approx(1 / 3)
    assert s["terminated_rate"] == 0.5 and s["truncated_rate"] == 0.25
    assert s["end_reasons"] == {"error": 0.25, "terminated": 0.5, "truncated:turns": 0.25}
    assert s["truncation_reasons"] == {"turns": 1} and s["truncation_rates"] == {"turns": 0.25}
    assert s["episode_errors"] == 1 and s["verify_errors"] == 0
    assert s["tool_calls"] == 3 and s["tool_errors"] == {"invalid_arguments": 1}
    assert s["tool_error_rates"] == {"invalid_arguments": pytest.approx(1 / 3)}
    assert s["tokens"]["in"] == 100 + 120 + 130 + 100 + 130
    assert s["tokens"]["out"] == 10 + 5 + 20 + 10 + 20
    assert s["tokens"]["episodes_with_usage"] == 2
    assert s["time"] == {"policy_s": 3.0, "env_s": 1.5, "verify_s": 0.75, "total_s": 6.0}
    assert s["components"] == {"correct": 0.5}
    assert s["metrics"] == {"used_calculator": 0.5}
    rows = {r["task_id"]: r for r in s["per_task"]}
    assert rows["A"]["successes"] == 1 and rows["D"]["scored"] == 0 and rows["D"]["mean_reward"] is None
    assert rows["D"]["episode_errors"] == 1


def test_no_usage_means_no_token_numbers_and_empty_run_has_no_mean():
    s = summarize([traj("A", 0, 1.0)])
    assert s["tokens"] is None
    empty = summarize([])
    assert empty["mean_reward"] is None and empty["mean_reward_ci"] is None and empty["pass_at_k"] == {}


def test_grader_errors_are_counted_not_averaged_as_zero():
    s = summarize([traj("A", 0, 1.0), traj("A", 1, None, verdict_status="error")])
    assert s["verify_errors"] == 1 and s["mean_reward"] == 1.0 and s["pass_at_k"] == {"1": 1.0}


def test_evaluate_writes_the_metrics_into_summary_json(tmp_path):
    _, summary = evaluate("proofgym/Arith-v0", ReferencePolicy(), episodes=4, repeats=2, out=tmp_path)
    on_disk = orjson.loads((tmp_path / "summary.json").read_bytes())
    assert on_disk == summary
    for key in ("episodes", "mean_reward", "terminated_rate", "truncated_rate", "verify_errors",
                "episode_errors", "tool_errors", "truncation_reasons", "scored"):
        assert key in on_disk
    assert on_disk["episodes"] == 8 and on_disk["tasks"] == 4
    assert on_disk["mean_reward"] == 1.0 and on_disk["mean_reward_ci"] == [1.0, 1.0]
    assert on_disk["pass_at_k"] == {"1": 1.0, "2": 1.0}
    assert on_disk["components"] == {"correct": 1.0}
    assert on_disk["metrics"]["used_calculator"] == 1.0
    assert on_disk["tool_calls"] == 8 and on_disk["tool_errors"] == {}
    assert all(not math.isnan(v) for v in on_disk["time"].values())
    assert on_disk["time"]["verify_s"] > 0


def test_summary_does_not_depend_on_the_order_episodes_finished():
    """Concurrent runs (and the Ray backend) record episodes in completion order: the summary,
    its per-task rows and its seeded bootstrap interval are the same for any order."""
    import random

    from proofgym.core import Verdict
    from proofgym.eval import compute_metrics
    from proofgym.record import Trajectory

    trajs = []
    for i in range(12):
        t = Trajectory(trajectory_id=f"t{i}#0", env_id="e", task_id=f"t{i}", task_hash="h", seed=i,
                       policy={}, prompt="", tools=[])
        t.verdict = Verdict(float(i % 3 == 0) * 0.5 + float(i % 4 == 0) * 0.5)
        t.extra["attempt"] = 0
        trajs.append(t)
    shuffled = trajs[:]
    random.Random(7).shuffle(shuffled)
    a, b = compute_metrics(trajs), compute_metrics(shuffled)
    assert a["mean_reward_ci"] == b["mean_reward_ci"] and a["mean_reward_ci"][0] < a["mean_reward_ci"][1]
    assert a["per_task"] == b["per_task"] and a == b
