"""Re-grading a stored run with the current (or another named) verifier version.

Each stored trajectory carries its task id and content hash and its frozen final state (the
``Artifact``), so grading it again needs only the task, looked up by id in the env's task set. The
new verdicts go to ``verdicts.jsonl`` beside the originals, keyed by (trajectory id, verifier
version): a re-grade replaces the earlier re-grade of the same key, never the original verdict.

Other versions: a task may keep earlier (or candidate) graders in an optional method
``verifiers() -> {version: fn(trace, runtime) -> float | Verdict}``; ``verifier_version=None`` (or
the task's own ``verifier_version``) uses ``Task.verify``.

Versions are never mixed silently: every new verdict is recorded with its ``verifier_version`` (and
the version of the verdict it re-grades), and a re-grade whose new verdicts would come from two
versions (tasks at different versions), or whose run's original verdicts do, is refused, because its
summary (the old and new means) would average two different graders. ``allow_mixed_versions=True``
(``proofgym verify --allow-mixed-versions``) runs it and reports each version's count and mean apart.

Every grading goes through a :class:`~proofgym.verify.pool.VerifierPool` (``proofgym verify``: a
``process`` pool), so a grader that raises, hangs past the timeout, segfaults or calls
``os._exit`` is recorded as an error verdict with the reason, and the re-grade goes on.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proofgym.core import EnvBuildError, Task, Verdict
from proofgym.core.defaults import DEFAULTS
from proofgym.core.errors import RegradeError as RegradeError
from proofgym.core.grading import other_verifiers
from proofgym.env import VerificationJob
from proofgym.make import make_env
from proofgym.record import RunStore, Trajectory
from proofgym.runtimes import Artifact
from proofgym.tasks import TaskSet
from proofgym.verify.pool import VerifierPool, pool_for

#: Seconds one re-grading may take when no timeout is given (as ``proofgym eval``).
GRADER_TIMEOUT_S = DEFAULTS.grader_timeout_s


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
    #: verifier version -> {"regraded": n, "new_mean": m}; more than one only when mixing was allowed
    versions: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: the versions of the run's original verdicts -> how many
    previous_versions: dict[str, int] = field(default_factory=dict)
    records: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "records"}


def version_label(task: Task, version: str | None) -> str:
    """The verifier version ``task`` grades with at ``version`` (``None``: its current one).

    Raises:
        RegradeError: the task neither is at ``version`` nor keeps a grader of it in ``verifiers()``.
    """
    current = str(task.verifier_version)
    if version is None or version == current:
        return current
    others = other_verifiers(task)
    if version not in others:
        raise RegradeError(f"task {task.id!r} ({type(task).__qualname__}) has no verifier version "
                           f"{version!r}; it offers {sorted({current, *others})}")
    return version


def grader_version(verdict: Verdict | None) -> str | None:
    """The verifier version a stored verdict names in its grader (``Class@version``)."""
    grader = verdict.grader if verdict is not None else None
    return grader.rpartition("@")[2] if grader and "@" in grader else None


def _mixed(kind: str, counts: dict[str, int]) -> str:
    listed = ", ".join(f"{v!r} ({n} trajectories)" for v, n in sorted(counts.items()))
    return f"{kind} come from {len(counts)} verifier versions: {listed}"


def _taskset_of(store: RunStore) -> TaskSet:
    env_conf = store.contract["env"]
    if not env_conf.get("id"):
        raise RegradeError(f"{store.root}: the contract names no env id; pass tasks= to regrade_run")
    try:
        env = make_env(env_conf["id"], **env_conf.get("kwargs", {}))
    except EnvBuildError as exc:
        raise RegradeError(f"cannot rebuild env {env_conf['id']!r} to look its tasks up ({exc}); "
                           "import the module that registers it, or pass tasks=") from None
    try:
        if getattr(env, "tasks", None) is None:
            raise RegradeError(f"env {env_conf['id']!r} has no task set to look tasks up in")
        return env.tasks
    finally:
        env.close()


def regrade_job(record: Trajectory, tasks: TaskSet, version: str | None,
                ) -> tuple[str | None, VerificationJob | Verdict]:
    """The verifier version and the job that re-grades one stored trajectory, or the verdict it
    gets without grading (``unscored``: the episode did not finish; an error: its task changed).
    The version label is ``None`` when the trajectory is not re-graded at all."""
    if record.status != "ok" or record.artifact is None:
        why = record.error or "no artifact was stored with it"
        return None, Verdict.unscored(f"not re-graded: the episode did not finish ({why})")
    task = tasks.get(record.task_id)
    label = version_label(task, version)
    if task.content_hash != record.task_hash:
        return label, Verdict.failed(
            f"task {task.id!r} changed since the run (content hash {record.task_hash} -> "
            f"{task.content_hash}); re-grading would grade a different task",
            grader=f"{type(task).__qualname__}@{label}")
    return label, VerificationJob(task, record.trace(), Artifact.from_dict(record.artifact),
                                  verifier_version=None if label == str(task.verifier_version) else label)


def regrade_run(run: str | Path, *, verifier_version: str | None = None,
                tasks: TaskSet | None = None, verifier: str | VerifierPool | None = None,
                grader_timeout_s: float | None = None, grader_processes: int | None = None,
                allow_mixed_versions: bool = False) -> RegradeReport:
    """Re-grade every finished trajectory of the run in ``run``; append the verdicts to its
    ``verdicts.jsonl`` (replacing earlier re-grades of the same version) and return what changed.

    Gradings go through ``verifier``: a :class:`VerifierPool` (left open), or the backend of a
    pool made for this call and closed at its end: ``"process"`` (the default, as ``proofgym
    verify``'s, :meth:`~proofgym.core.defaults.RunDefaults.verifier_backend`: worker processes,
    so a grader that segfaults or calls ``os._exit`` is an error verdict and this process carries
    on) or ``"inline"`` (threads here; a grader past its timeout is abandoned).
    ``grader_timeout_s``: seconds one grading may take (default: the given pool's timeout, else
    :data:`GRADER_TIMEOUT_S`); ``grader_processes``: the worker processes of a pool made here
    (default: the CPU count). ``allow_mixed_versions``: see the module docstring.
    """
    if grader_timeout_s is not None and not grader_timeout_s > 0:
        raise RegradeError(f"the grader timeout must be a number of seconds > 0 (got {grader_timeout_s:g})")
    store = RunStore.open(run)
    tasks = tasks if tasks is not None else _taskset_of(store)
    report = RegradeReport(str(run), verifier_version)
    planned = [(traj, *regrade_job(traj, tasks, verifier_version)) for traj in store.trajectories()]
    new_versions = Counter(label for _, label, _ in planned if label is not None)
    old_versions = Counter(v for traj, label, _ in planned
                           if label is not None and (v := grader_version(traj.verdict)) is not None)
    report.previous_versions = dict(old_versions)
    problems = [_mixed(kind, dict(counts)) for kind, counts in
                (("the new verdicts would", new_versions), ("the run's original verdicts", old_versions))
                if len(counts) > 1]
    if problems and not allow_mixed_versions:  # checked before any grading: nothing half-done
        raise RegradeError(f"refusing to summarise two verifier versions as one: {'; '.join(problems)}. "
                           "Re-grade with one --verifier-version every task offers, or pass "
                           "--allow-mixed-versions to report each version apart")
    jobs = [(i, item) for i, (_, _, item) in enumerate(planned) if isinstance(item, VerificationJob)]
    timeout = GRADER_TIMEOUT_S if grader_timeout_s is None else grader_timeout_s
    # booted by the first job, whose task module its workers then import before they start
    with pool_for(verifier, timeout_s=timeout, processes=grader_processes, boot=False) as pool:
        # every job is submitted before any is awaited: they grade concurrently, within the
        # pool's in-flight limit
        futures = {i: pool.submit(job, f"regrade/{planned[i][0].trajectory_id}", timeout_s=grader_timeout_s)
                   for i, job in jobs}
        graded = {i: future.result() for i, future in futures.items()}
    old_scores, new_scores = [], []
    for i, (traj, label, item) in enumerate(planned):
        if label is None:
            report.skipped += 1
            continue
        verdict = graded.get(i, item)
        assert isinstance(verdict, Verdict)
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
                         "reward": traj.reward, "verifier_version": grader_version(old)},
        })
        entry = report.versions.setdefault(label, {"regraded": 0, "scored": [], "new_mean": None})
        entry["regraded"] += 1
        if verdict.scored:
            entry["scored"].append(verdict.reward)
    for entry in report.versions.values():
        scored = entry.pop("scored")
        entry["new_mean"] = sum(scored) / len(scored) if scored else None
    if old_scores:
        report.old_mean = sum(old_scores) / len(old_scores)
        report.new_mean = sum(new_scores) / len(new_scores)
    store.put_verdicts(report.records)
    return report
