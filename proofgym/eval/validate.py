"""Grader validation: prove a grader sound before anyone trains on it (``proofgym validate``).

For every task: its reference solution must score 1; doing nothing must score 0, both as an
episode that ends every turn with an empty message (``do_nothing``) and as an empty trace graded
on the untouched initial state (``no_action``); every negative control the task ships
(``Task.controls()``: known-wrong answers, shortcuts, tampering) must score 0; and grading the
same trajectory twice must give the same verdict. A grader error is a failure, never a pass.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from proofgym.core import Task, Verdict, describe_exception
from proofgym.env import UniversalVerifiableEnv
from proofgym.eval.runner import make_env
from proofgym.record import Trajectory
from proofgym.rollout import ControlPolicy, Policy, ReferencePolicy, ScriptedPolicy, run_episode

#: Rewards within this distance of the expected 1 or 0 pass (graders compute in floating point).
TOLERANCE = 1e-9

#: Metrics with these suffixes are durations: they differ from one grading to the next by nature,
#: so the determinism check leaves them out (every other field of the verdict must be identical).
DURATION_SUFFIXES = ("_s", "_ms", "_seconds")

REFERENCE = "reference"
DO_NOTHING = "do_nothing"
NO_ACTION = "no_action"
DETERMINISTIC = "same_verdict_twice"
HAS_CONTROLS = "ships_controls"


@dataclass
class CheckResult:
    """One row of the validation table: a check run on ``tasks`` tasks."""

    name: str
    expectation: str
    tasks: int = 0
    passed: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)  # (task id, what went wrong)

    @property
    def failed(self) -> int:
        return len(self.failures)

    @property
    def ok(self) -> bool:
        return not self.failures

    def record(self, task_id: str, problem: str | None) -> None:
        self.tasks += 1
        if problem is None:
            self.passed += 1
        else:
            self.failures.append((task_id, problem))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "expectation": self.expectation, "tasks": self.tasks,
                "passed": self.passed, "failed": self.failed,
                "failures": [{"task_id": t, "problem": p} for t, p in self.failures]}


@dataclass
class ValidationReport:
    """Every check of a validation run; ``ok`` only when every check passed on every task."""

    env_id: str
    tasks: int
    checks: list[CheckResult]

    @property
    def ok(self) -> bool:
        return self.tasks > 0 and all(c.ok for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        return {"env_id": self.env_id, "tasks": self.tasks, "ok": self.ok,
                "checks": [c.to_dict() for c in self.checks]}


def _score_problem(verdict: Verdict | None, traj: Trajectory, expected: float) -> str | None:
    """What is wrong with the outcome, or ``None`` when it scored ``expected``."""
    if traj.status == "error":
        return f"episode failed: {traj.error}"
    if verdict is None:
        return "no verdict"
    if verdict.status == "error":
        return f"grader error: {verdict.error}"
    if not verdict.scored:
        return f"unscored: {verdict.error}"
    if abs(verdict.reward - expected) > TOLERANCE:
        return f"scored {verdict.reward:g}, expected {expected:g}"
    return None


def verdict_difference(first: Verdict, second: Verdict) -> str | None:
    """What differs between two gradings of one trajectory (``None``: the same verdict), ignoring
    duration metrics (``*_s``, ``*_ms``, ``*_seconds``) and the ``reason`` (an explanation, which
    may quote a failure with a memory address in it)."""
    a, b = first.to_dict(), second.to_dict()
    diffs = [f"{k} {a[k]!r} then {b[k]!r}" for k in a
             if k not in ("metrics", "reason") and a[k] != b[k]]
    ma, mb = a["metrics"], b["metrics"]
    for name in sorted(set(ma) | set(mb)):
        if not name.endswith(DURATION_SUFFIXES) and ma.get(name) != mb.get(name):
            diffs.append(f"metrics.{name} {ma.get(name)!r} then {mb.get(name)!r}")
    return "; ".join(diffs) or None


def _play(env: UniversalVerifiableEnv, policy: Policy, task: Task,
          ) -> tuple[Trajectory, Verdict | None, Verdict | None]:
    """Run one episode and grade its trajectory twice, each time from a fresh verification job."""
    traj = run_episode(env, policy, task=task, seed=0, verify=False)
    if traj.status == "error":
        return traj, None, None
    first = env.verification_job(traj.trace()).run()
    second = env.verification_job(traj.trace()).run()
    return traj, first, second


def _no_action_problem(env: UniversalVerifiableEnv, task: Task) -> str | None:
    """Grade an empty trace right after ``reset``: the agent did nothing at all."""
    try:
        env.reset(seed=0, options={"task": task})
    except Exception as exc:  # a task whose reset fails cannot be validated; say so in its row
        return f"reset failed: {describe_exception(exc)}"
    verdict = env.verify([])
    traj = Trajectory(trajectory_id="no_action", env_id="", task_id=task.id, task_hash="", seed=0,
                      policy={}, prompt="", tools=[])
    return _score_problem(verdict, traj, 0.0)


def validate_env(env: UniversalVerifiableEnv, tasks: Sequence[Task], *, env_id: str = "",
                 on_task: Callable[[Task], None] | None = None) -> ValidationReport:
    """Validate the grader of ``tasks`` in ``env`` (see the module docstring for the checks)."""
    reference = CheckResult(REFERENCE, "= 1")
    nothing = CheckResult(DO_NOTHING, "= 0")
    no_action = CheckResult(NO_ACTION, "= 0")
    unstable: dict[str, str] = {}  # task id -> the first episode graded differently twice
    shipped = CheckResult(HAS_CONTROLS, "≥ 1 control")
    controls: dict[str, CheckResult] = {}

    def check(result: CheckResult, policy: Policy, task: Task, expected: float) -> None:
        traj, first, second = _play(env, policy, task)
        result.record(task.id, _score_problem(first, traj, expected))
        if first is not None:
            diff = "no second verdict" if second is None else verdict_difference(first, second)
            if diff is not None:
                unstable.setdefault(task.id, f"{result.name}: {diff}")

    for task in tasks:
        check(reference, ReferencePolicy(), task, 1.0)
        check(nothing, ScriptedPolicy([], name="do_nothing"), task, 0.0)
        no_action.record(task.id, _no_action_problem(env, task))
        try:
            names = list(task.controls())
        except Exception as exc:  # a broken controls() is a validation failure, reported as such
            shipped.record(task.id, f"controls() raised {describe_exception(exc)}")
            names = []
        else:
            shipped.record(task.id, None if names else "the task ships no negative controls")
        for name in names:
            row = controls.setdefault(name, CheckResult(f"control:{name}", "= 0"))
            check(row, ControlPolicy(name), task, 0.0)
        if on_task is not None:
            on_task(task)
    # every graded episode of a task is regraded; the task passes when all gave the same verdict
    determinism = CheckResult(DETERMINISTIC, "same twice")
    for task in tasks:
        determinism.record(task.id, unstable.get(task.id))
    return ValidationReport(env_id, len(tasks),
                            [reference, nothing, no_action, *controls.values(), determinism, shipped])


def validate(env_id: str, *, limit: int | None = None, task_ids: Sequence[str] | None = None,
             env_kwargs: dict[str, Any] | None = None,
             on_task: Callable[[Task], None] | None = None) -> ValidationReport:
    """Validate the grader of the environment ``env_id`` (a Gymnasium id) on its task set:
    every task, the first ``limit``, or the tasks named in ``task_ids``."""
    env = make_env(env_id, **(env_kwargs or {}))
    try:
        if env.tasks is None:
            raise ValueError(f"{env_id!r} has no task set to validate")
        tasks = [env.tasks.get(t) for t in task_ids] if task_ids else list(env.tasks)
        if limit is not None:
            tasks = tasks[:limit]
        return validate_env(env, tasks, env_id=env_id, on_task=on_task)
    finally:
        env.close()
