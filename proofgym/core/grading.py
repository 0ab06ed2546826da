"""Calling a task's grader safely: whatever it does, the caller gets a Verdict."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from proofgym.core.task import Task
from proofgym.core.trace import Trace
from proofgym.core.verdict import Verdict, coerce_verdict, describe_exception


def other_verifiers(task: Task) -> Mapping[str, Callable[..., Any]]:
    """The earlier (or candidate) graders a task keeps for re-grading: its optional
    ``verifiers() -> {version: fn(trace, runtime) -> float | Verdict}`` (``{}`` without one)."""
    return task.verifiers()


def grade(task: Task, trace: Trace | list[Any], runtime_view: Any, version: str | None = None) -> Verdict:
    """Run the task's grader at ``version`` (``None`` or the task's own ``verifier_version``:
    ``task.verify``; another: that entry of ``task.verifiers()``) and return a :class:`Verdict`.

    A grader that raises yields ``status="error"`` with the reason, never a silent 0.0: a broken
    grader is not the agent's fault, and training on it as a zero would teach the wrong lesson.
    """
    current = str(task.verifier_version)
    label = version if version is not None else current
    grader = f"{type(task).__qualname__}@{label}"
    try:
        if label == current:
            fn: Callable[..., Any] = task.verify
        else:
            others = other_verifiers(task)
            if label not in others:
                return Verdict.failed(f"task {task.id!r} has no verifier version {label!r}; it offers "
                                      f"{sorted({current, *others})}", grader=grader)
            fn = others[label]
        result = fn(Trace.coerce(trace), runtime_view)
    except Exception as exc:  # any grader bug becomes a recorded error verdict
        return Verdict.failed(describe_exception(exc), grader=grader)
    verdict = coerce_verdict(result, grader=grader)
    if verdict.grader is None:
        verdict = replace(verdict, grader=grader)  # keeps every field (errors, failed_gates, ...)
    return verdict
