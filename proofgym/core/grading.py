"""Calling a task's grader safely: whatever it does, the caller gets a Verdict."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from proofgym.core.task import Task
from proofgym.core.trace import Trace
from proofgym.core.verdict import Verdict, coerce_verdict, describe_exception


def grade(task: Task, trace: Trace | list[Any], runtime_view: Any) -> Verdict:
    """Run ``task.verify`` and return a :class:`Verdict`.

    A grader that raises yields ``status="error"`` with the reason, never a silent 0.0: a broken
    grader is not the agent's fault, and training on it as a zero would teach the wrong lesson.
    """
    grader = f"{type(task).__qualname__}@{task.verifier_version}"
    try:
        result = task.verify(Trace.coerce(trace), runtime_view)
    except Exception as exc:  # any grader bug becomes a recorded error verdict
        return Verdict.failed(describe_exception(exc), grader=grader)
    verdict = coerce_verdict(result, grader=grader)
    if verdict.grader is None:
        verdict = replace(verdict, grader=grader)  # keeps every field (errors, failed_gates, ...)
    return verdict
