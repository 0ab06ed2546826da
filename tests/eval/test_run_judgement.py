"""``evaluate()`` decides whether a run failed (every episode an error, or over the error budget),
so a library caller gets the same judgement ``proofgym eval`` prints; the run is recorded first."""

from __future__ import annotations

import json

import pytest

from proofgym.errors import ErrorBudgetExceeded, ProofgymError, RunFailedError
from proofgym.eval import evaluate
from proofgym.eval.runner import judge_run
from proofgym.record import Trajectory
from proofgym.rollout import make_policy

ARITH = "proofgym/Arith-v0"


def test_every_episode_failing_is_a_typed_error_after_the_run_is_recorded(tmp_path):
    with pytest.raises(RunFailedError, match=r"every episode \(2\) ended in an error") as failed:
        evaluate(ARITH, make_policy("control:nope"), episodes=2, out=tmp_path, verifier="inline")
    assert not isinstance(failed.value, ErrorBudgetExceeded) and failed.value.exit_code == 1
    assert isinstance(failed.value, ProofgymError)
    assert len(failed.value.trajectories) == 2 and failed.value.summary["episodes"] == 2
    assert json.loads((tmp_path / "summary.json").read_text())["episodes"] == 2


def _run(statuses: list[str]) -> list[Trajectory]:
    return [Trajectory(trajectory_id=f"t{i}", env_id=ARITH, task_id=f"t{i}", task_hash="h", seed=i,
                       policy={}, prompt="", tools=[], status=status,
                       error="boom\nsecond line" if status == "error" else None)
            for i, status in enumerate(statuses)]


def test_the_error_budget_is_the_runs_share_of_unscored_episodes():
    ok = _run(["ok", "ok"])
    judge_run(ok, {"error_rate": 0.05}, max_error_rate=0.05)  # at the budget: a result
    judge_run(ok, {"error_rate": 1.0}, max_error_rate=None)  # no budget
    with pytest.raises(ErrorBudgetExceeded, match=r"over max_error_rate 5\.0%") as over:
        judge_run(ok, {"error_rate": 0.5, "mean_reward": 1.0}, max_error_rate=0.05)
    assert (over.value.error_rate, over.value.max_error_rate, over.value.exit_code) == (0.5, 0.05, 3)
    assert over.value.summary["mean_reward"] == 1.0
    # every episode an error: that, not the budget, is the run's failure (even with no budget)
    with pytest.raises(RunFailedError, match=r"e\.g\.: boom$") as failed:
        judge_run(_run(["error"]), {"error_rate": 1.0}, max_error_rate=None)
    assert type(failed.value) is RunFailedError
    judge_run([], {}, max_error_rate=0.0)  # nothing ran (a finished run resumed): no failure
    with pytest.raises(ProofgymError, match="max_error_rate"):
        evaluate(ARITH, make_policy("reference"), episodes=1, max_error_rate=1.5)
