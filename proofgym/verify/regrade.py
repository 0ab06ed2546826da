"""Re-grading a stored run with the current (or another named) verifier version.

Each stored trajectory carries its task id and content hash and its frozen final state (the
``Artifact``), so grading it again needs only the task, looked up by id in the env's task set. The
new verdicts go to ``verdicts.jsonl`` beside the originals, keyed by (trajectory id, verifier
version): a re-grade replaces the earlier re-grade of the same key, never the original verdict.

Other versions: a task may keep earlier (or candidate) graders in an optional method
``verifiers() -> {version: fn(trace, runtime) -> float | Verdict}``; ``verifier_version=None`` (or
the task's own ``verifier_version``) uses ``Task.verify``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium

from proofgym.core import ProofgymError, Task, Trace, Verdict, coerce_verdict, describe_exception, grade
from proofgym.record import RunStore, Trajectory
from proofgym.runtimes import Artifact
from proofgym.tasks import TaskSet


class RegradeError(ProofgymError, ValueError):
    """A re-grade that cannot run as asked (unknown verifier version, no task set)."""


@dataclass
class RegradeReport:
    """What a re-grade did: counts, and old vs new mean rewards over trajectories scored both times."""

    run: str
    verifier_version: str | None
    regraded: int = 0
    skipped: int = 0
    errors: int = 0
    changed: int = 0
    old_mean: float | None = None
    new_mean: float | None = None
    records: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "records"}


def grader_for(task: Task, version: str | None) -> tuple[str, Callable[[Trace, Any], Verdict]]:
    """The version label and grading function of ``task`` at ``version`` (``None``: current)."""
    current = str(task.verifier_version)
    if version is None or version == current:
        return current, lambda trace, view: grade(task, trace, view)
    others: Mapping[str, Callable[..., Any]] = task.verifiers() if hasattr(task, "verifiers") else {}
    if version not in others:
        offered = sorted({current, *others})
        raise RegradeError(f"task {task.id!r} ({type(task).__qualname__}) has no verifier version "
                           f"{version!r}; it offers {offered}")
    fn = others[version]
    label = f"{type(task).__qualname__}@{version}"

    def run(trace: Trace, view: Any) -> Verdict:
        try:
            return coerce_verdict(fn(trace, view), grader=label)
        except Exception as exc:  # a grader bug is an error verdict, as in grade()
            return Verdict.failed(describe_exception(exc), grader=label)

    return version, run


def _taskset_of(store: RunStore) -> TaskSet:
    env_conf = store.contract["env"]
    if not env_conf.get("id"):
        raise RegradeError(f"{store.root}: the contract names no env id; pass tasks= to regrade_run")
    try:
        env = gymnasium.make(env_conf["id"], **env_conf.get("kwargs", {})).unwrapped
    except gymnasium.error.Error as exc:
        raise RegradeError(f"cannot rebuild env {env_conf['id']!r} to look its tasks up ({exc}); "
                           "import the module that registers it, or pass tasks=") from None
    try:
        if getattr(env, "tasks", None) is None:
            raise RegradeError(f"env {env_conf['id']!r} has no task set to look tasks up in")
        return env.tasks
    finally:
        env.close()


def regrade_one(record: Trajectory, tasks: TaskSet, version: str | None) -> tuple[str | None, Verdict]:
    """The verifier version used and the new verdict of one stored trajectory."""
    if record.status != "ok" or record.artifact is None:
        why = record.error or "no artifact was stored with it"
        return None, Verdict.unscored(f"not re-graded: the episode did not finish ({why})")
    task = tasks.get(record.task_id)
    label, fn = grader_for(task, version)
    if task.content_hash != record.task_hash:
        return label, Verdict.failed(
            f"task {task.id!r} changed since the run (content hash {record.task_hash} -> "
            f"{task.content_hash}); re-grading would grade a different task", grader=label)
    return label, fn(record.trace(), Artifact.from_dict(record.artifact).view())


def regrade_run(run: str | Path, *, verifier_version: str | None = None,
                tasks: TaskSet | None = None) -> RegradeReport:
    """Re-grade every finished trajectory of the run in ``run``; append the verdicts to its
    ``verdicts.jsonl`` (replacing earlier re-grades of the same version) and return what changed."""
    store = RunStore.open(run)
    tasks = tasks if tasks is not None else _taskset_of(store)
    report = RegradeReport(str(run), verifier_version)
    old_scores, new_scores = [], []
    for traj in store.trajectories():
        label, verdict = regrade_one(traj, tasks, verifier_version)
        if label is None:
            report.skipped += 1
            continue
        report.regraded += 1
        report.errors += verdict.status == "error"
        old = traj.verdict
        if old is not None and old.scored and verdict.scored:
            old_scores.append(old.reward)
            new_scores.append(verdict.reward)
            report.changed += old.reward != verdict.reward
        report.records.append({
            "trajectory_id": traj.trajectory_id, "task_id": traj.task_id, "task_hash": traj.task_hash,
            "split": traj.split, "contract_id": traj.contract_id, "verifier_version": label,
            "verdict": verdict.to_dict(), "source": "regrade",
            "previous": {"grader": old.grader if old else None, "status": old.status if old else None,
                         "reward": traj.reward},
        })
    if old_scores:
        report.old_mean = sum(old_scores) / len(old_scores)
        report.new_mean = sum(new_scores) / len(new_scores)
    store.put_verdicts(report.records)
    return report
