"""Evaluation: running policies, metrics, the HTML report, grader validation, comparing runs and
data export."""

from proofgym.eval.compare import compare
from proofgym.eval.export import chat_messages, preference_pairs, sft_records
from proofgym.eval.metrics import compute_metrics, pass_at_k, summarize, summary_of
from proofgym.eval.report import render_report, write_report
from proofgym.eval.runner import (
    EpisodeSpec,
    JsonlSink,
    TrajectorySink,
    evaluate,
    plan_episodes,
    run_plan,
)
from proofgym.eval.runs import Run, TrainSplitWarning, start_run
from proofgym.eval.validate import ValidationReport, validate, validate_env
from proofgym.make import make_env
from proofgym.record.rundir import RunRecord, load_run

__all__ = ["EpisodeSpec", "JsonlSink", "Run", "RunRecord", "TrainSplitWarning", "TrajectorySink",
           "ValidationReport", "chat_messages", "compare", "compute_metrics", "evaluate", "load_run",
           "make_env", "pass_at_k", "plan_episodes", "preference_pairs", "render_report", "run_plan",
           "sft_records", "start_run", "summarize", "summary_of", "validate", "validate_env", "write_report"]
