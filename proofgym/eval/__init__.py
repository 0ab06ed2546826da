"""Evaluation: metrics over trajectories."""

from proofgym.eval.runner import (
    EpisodeSpec,
    JsonlSink,
    TrajectorySink,
    evaluate,
    make_env,
    plan_episodes,
    run_plan,
)
from proofgym.eval.runs import Run, TrainSplitWarning, start_run
from proofgym.eval.summary import summarize

__all__ = ["EpisodeSpec", "JsonlSink", "Run", "TrainSplitWarning", "TrajectorySink", "evaluate", "make_env",
           "plan_episodes", "run_plan", "start_run", "summarize"]
