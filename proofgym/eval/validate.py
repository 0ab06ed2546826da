"""Grader validation: prove a grader sound before anyone trains on it (``proofgym validate``).

For every task: its reference solution must score 1; doing nothing must score 0, both as an
episode that ends every turn with an empty message (``do_nothing``) and as an empty trace graded
on the untouched initial state (``no_action``); every negative control the task ships
(``Task.controls()``: known-wrong answers, shortcuts, tampering) must score 0; and grading the
same trajectory twice must give the same verdict. A grader error is a failure, never a pass.

Every grading goes through a :class:`~proofgym.verify.pool.VerifierPool`: a grader that raises,
runs past the grading timeout or kills its process (``process`` backend, as ``proofgym validate``
uses) fails its check with the reason, and validation goes on with the next check. The reference
is graded first, alone: when its grading runs past the timeout, the task's remaining checks fail as
not graded (each would most likely cost another timeout), so a grader that always hangs costs one
timeout per task, not one per check. The other checks' gradings run while later episodes play;
after a grading of the task has run past the timeout, none is graded a second time.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from queue import Empty, Queue
from typing import Any

from proofgym.core import ConfigError, Task, Verdict, describe_exception
from proofgym.core.defaults import DEFAULTS
from proofgym.env import UniversalVerifiableEnv, VerificationJob
from proofgym.make import make_env, takes_tasks
from proofgym.record import Trajectory, trajectory_id_for
from proofgym.rollout import ControlPolicy, Policy, ReferencePolicy, ScriptedPolicy, run_episode
from proofgym.verify.pool import VerifierPool, pool_for, timed_out

#: Seconds a grading may take when no timeout is given (as ``proofgym eval``).
GRADER_TIMEOUT_S = DEFAULTS.grader_timeout_s

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
    wall_time_s: float | None = None
    concurrency: int = 1
    env_kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.tasks > 0 and all(c.ok for c in self.checks)

    def failures(self) -> list[tuple[str, str, str]]:
        """Every failure as (check, task id, problem), check by check."""
        return [(c.name, t, p) for c in self.checks for t, p in c.failures]

    def to_dict(self) -> dict[str, Any]:
        return {"env_id": self.env_id, "tasks": self.tasks, "ok": self.ok,
                "wall_time_s": self.wall_time_s, "concurrency": self.concurrency,
                "env_kwargs": {k: v if isinstance(v, (str, int, float, bool, type(None), list, dict))
                               else str(v) for k, v in self.env_kwargs.items()},
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


@dataclass
class _Grading:
    """Where a validation grades: the pool, and the per-job timeout (``None``: the pool's)."""

    pool: VerifierPool
    timeout_s: float | None = None

    def submit(self, job: VerificationJob, name: str) -> cf.Future[Verdict]:
        """Queue ``job`` (``name`` names it in errors) and return the future of its verdict."""
        return self.pool.submit(job, name, timeout_s=self.timeout_s)


@dataclass
class _Check:
    """One check of one task: its episode played, its first grading queued, and the frozen job
    of its second grading (queued once the first has a verdict: the pool shares one verdict
    between identical jobs in flight)."""

    name: str
    expectation: str
    expected: float
    traj: Trajectory
    first: cf.Future[Verdict] | None = None
    again: VerificationJob | None = None
    problem: str | None = None  # decided without a verdict (a reset that failed)


def _start(env: UniversalVerifiableEnv, policy: Policy | None, task: Task, grading: _Grading,
           name: str, expectation: str, expected: float) -> _Check:
    """Play the check's episode (``policy=None``: no episode, an empty trace graded right after
    ``reset``) and queue its first grading. The episode's jobs are frozen at once, so the env may
    play the next check while this one grades."""
    where = f"validate/{task.id}/{name}"
    if policy is None:
        traj = Trajectory(trajectory_id=trajectory_id_for(None, task.id, 0), env_id="",
                          task_id=task.id, task_hash="", seed=0, policy={}, prompt="", tools=[])
        try:
            env.reset(seed=0, options={"task": task})
        except Exception as exc:  # a task whose reset fails cannot be validated; say so in its row
            return _Check(name, expectation, expected, traj,
                          problem=f"reset failed: {describe_exception(exc)}")
        return _Check(name, expectation, expected, traj, grading.submit(env.verification_job([]), where))
    traj = run_episode(env, policy, task=task, seed=0, verify=False)
    if traj.status == "error":
        return _Check(name, expectation, expected, traj)
    return _Check(name, expectation, expected, traj,
                  grading.submit(env.verification_job(traj.trace()), where),
                  env.verification_job(traj.trace()))


@dataclass
class _TaskOutcome:
    """What the checks found on one task: (check name, expectation, problem) rows in order, and
    the first verdict that differed between two gradings."""

    rows: list[tuple[str, str, str | None]] = field(default_factory=list)
    unstable: str | None = None
    regraded: int = 0  # episodes graded twice (a grading that failed is not repeated)
    hung: str | None = None  # the check whose grading ran past the timeout

    def finish(self, checks: Sequence[_Check], grading: _Grading, task: Task) -> None:
        """Wait for each check's first verdict in order, queue its second grading (unless the
        first failed, or some grading of this task ran past the timeout: a grader that hung
        once would most likely hang again), then compare the two."""
        seconds: list[tuple[_Check, Verdict, cf.Future[Verdict] | None]] = []
        for check in checks:
            first = check.first.result() if check.first is not None else None
            problem = check.problem or _score_problem(first, check.traj, check.expected)
            self.rows.append((check.name, check.expectation, problem))
            if first is None:
                continue
            if timed_out(first) and self.hung is None:
                self.hung = check.name
            if first.status == "error" or check.again is None or self.hung is not None:
                continue  # not graded twice (the row above has failed already, or no second job)
            where = f"validate/{task.id}/{check.name}"
            seconds.append((check, first, grading.submit(check.again, where)))
        for check, first, future in seconds:
            second = future.result() if future is not None else None
            self.regraded += 1
            if self.unstable is None:
                diff = "no second verdict" if second is None else verdict_difference(first, second)
                if diff is not None:
                    self.unstable = f"{check.name}: {diff}"


def _validate_task(env: UniversalVerifiableEnv, task: Task, grading: _Grading,
                   only: frozenset[str] | None = None) -> _TaskOutcome:
    """The reference is graded first, alone: a grader that hangs on it costs one timeout, and
    the task's other checks fail as not graded. The others are then played one after another,
    each grading queued as its episode ends, so their gradings run while later episodes play.
    ``only``: the controls to play (default: every control the task ships)."""
    outcome = _TaskOutcome()
    outcome.finish([_start(env, ReferencePolicy(), task, grading, REFERENCE, "= 1", 1.0)], grading, task)
    try:
        names = list(task.controls())
    except Exception as exc:  # a broken controls() is a validation failure, reported as such
        names, shipped = [], f"controls() raised {describe_exception(exc)}"
    else:
        shipped = None if names else "the task ships no negative controls"
    plan: list[tuple[str, Policy | None]] = [(DO_NOTHING, ScriptedPolicy([], name="do_nothing")),
                                             (NO_ACTION, None)]
    plan += [(f"control:{name}", ControlPolicy(name)) for name in names if only is None or name in only]
    if outcome.hung is not None:
        skipped = f"not graded: this task's grader ran past the timeout on {outcome.hung} (see that row)"
        outcome.rows += [(name, "= 0", skipped) for name, _ in plan]
    else:
        outcome.finish([_start(env, policy, task, grading, name, "= 0", 0.0) for name, policy in plan],
                       grading, task)
    outcome.rows.append((HAS_CONTROLS, "≥ 1 control", shipped))
    return outcome


def validate_env(env: UniversalVerifiableEnv | Sequence[UniversalVerifiableEnv], tasks: Sequence[Task], *,
                 env_id: str = "", on_task: Callable[[Task], None] | None = None,
                 verifier: str | VerifierPool | None = None,
                 grader_timeout_s: float | None = None,
                 controls: Sequence[str] | None = None) -> ValidationReport:
    """Validate the grader of ``tasks`` in ``env`` (see the module docstring for the checks).

    Given several envs (independent instances of one environment), tasks are validated
    concurrently, one thread per env; the report is the same as with one env (rows and failures
    in task order). ``on_task`` is called once per finished task, from one thread at a time.

    Gradings go through ``verifier``: a :class:`VerifierPool` (left open), or the backend of a
    pool made for this call and closed at its end: ``"process"`` (the default, as ``proofgym
    validate``'s, :meth:`~proofgym.core.defaults.RunDefaults.verifier_backend`: worker processes,
    so a grader that segfaults or calls ``os._exit`` fails its check and this process carries on;
    tasks must pickle, and a script needs an ``if __name__ == "__main__":`` guard) or
    ``"inline"`` (threads here, so tasks defined anywhere work; a grader past its timeout is
    abandoned). ``grader_timeout_s``: seconds one grading may take (default:
    the given pool's timeout, else :data:`GRADER_TIMEOUT_S`); a task's own longer
    ``grading_timeout_s`` still gets its margin (see :func:`~proofgym.verify.pool.job_timeout`).
    ``controls``: play only these of each task's controls (default: all of them; the reference,
    doing nothing, determinism and "ships controls" are checked either way); a name no task ships
    is a :class:`ConfigError`.
    """
    envs = [env] if isinstance(env, UniversalVerifiableEnv) else list(env)
    if not envs:
        raise ConfigError("validate_env needs at least one env")
    only = _chosen_controls(tasks, controls)
    # a task's gradings queue as its episodes end: room for a grading per core even with one env
    slots = max(len(envs), os.cpu_count() or 1)
    options = {"processes": min(slots, os.cpu_count() or 1), "max_in_flight": slots,
               "timeout_s": GRADER_TIMEOUT_S if grader_timeout_s is None else grader_timeout_s,
               "boot": False}
    with pool_for(verifier, **options) as pool:
        # its workers boot with the tasks' modules imported, while the first episodes play
        pool.start(list(dict.fromkeys(type(task).__module__ for task in tasks)))
        return _validate_envs(envs, tasks, env_id, on_task, _Grading(pool, grader_timeout_s), only)


def _chosen_controls(tasks: Sequence[Task], controls: Sequence[str] | None) -> frozenset[str] | None:
    if controls is None:
        return None
    shipped: set[str] = set()
    for task in tasks:
        try:
            shipped.update(task.controls())
        except Exception:  # a broken controls() is reported by its task's row
            continue
    unknown = sorted(set(controls) - shipped)
    if unknown:
        raise ConfigError(f"no task to validate ships a control named {', '.join(map(repr, unknown))}; "
                          f"their controls: {', '.join(sorted(shipped)) or 'none'}")
    return frozenset(controls)


def _validate_envs(envs: list[UniversalVerifiableEnv], tasks: Sequence[Task], env_id: str,
                   on_task: Callable[[Task], None] | None, grading: _Grading,
                   only: frozenset[str] | None = None) -> ValidationReport:
    started = time.monotonic()
    outcomes: dict[str, _TaskOutcome] = {}
    if len(envs) == 1 or len(tasks) <= 1:
        for task in tasks:
            outcomes[task.id] = _validate_task(envs[0], task, grading, only)
            if on_task is not None:
                on_task(task)
    else:
        queue: Queue[Task] = Queue()
        for task in tasks:
            queue.put(task)
        lock = threading.Lock()

        def work(own: UniversalVerifiableEnv) -> None:
            while True:
                try:
                    task = queue.get_nowait()
                except Empty:
                    return
                outcome = _validate_task(own, task, grading, only)
                with lock:
                    outcomes[task.id] = outcome
                    if on_task is not None:
                        on_task(task)

        with ThreadPoolExecutor(len(envs), thread_name_prefix="proofgym-validate") as pool:
            for future in [pool.submit(work, e) for e in envs]:
                future.result()  # a worker's own failure (not a task's) is not swallowed
    rows: dict[str, CheckResult] = {}
    for name, expectation in ((REFERENCE, "= 1"), (DO_NOTHING, "= 0"), (NO_ACTION, "= 0")):
        rows[name] = CheckResult(name, expectation)
    for task in tasks:
        for name, expectation, problem in outcomes[task.id].rows:
            if name != HAS_CONTROLS:
                rows.setdefault(name, CheckResult(name, expectation)).record(task.id, problem)
    # every graded episode of a task is regraded; the task passes when all gave the same verdict
    determinism = CheckResult(DETERMINISTIC, "same twice")
    shipped = CheckResult(HAS_CONTROLS, "≥ 1 control")
    for task in tasks:
        outcome = outcomes[task.id]
        # no episode graded twice: nothing shows the grader is deterministic, so it is not a pass
        determinism.record(task.id, outcome.unstable if outcome.regraded else
                           "not checked: no grading of this task succeeded (see its other rows)")
        shipped.record(task.id, next(p for n, _, p in outcomes[task.id].rows if n == HAS_CONTROLS))
    return ValidationReport(env_id, len(tasks), [*rows.values(), determinism, shipped],
                            wall_time_s=time.monotonic() - started, concurrency=len(envs))


def validate(env_id: str, *, limit: int | None = None, task_ids: Sequence[str] | None = None,
             env_kwargs: dict[str, Any] | None = None,
             on_task: Callable[[Task], None] | None = None, concurrency: int | None = None,
             on_start: Callable[[int], None] | None = None, verifier: str | VerifierPool | None = None,
             grader_timeout_s: float | None = None,
             controls: Sequence[str] | None = None) -> ValidationReport:
    """Validate the grader of the environment ``env_id`` (a Gymnasium id) on its task set:
    every task, the first ``limit``, or the tasks named in ``task_ids``. With ``concurrency``
    N > 1 (default: :attr:`~proofgym.core.defaults.RunDefaults.validate_concurrency`, the CPU
    count, as ``proofgym validate``), N envs are made (sharing the task set when the factory
    takes ``tasks=``) and tasks are validated N at a time. ``on_start`` is told the number of
    tasks before the first runs. ``verifier``, ``grader_timeout_s`` and ``controls`` as in
    :func:`validate_env` (the default backend is ``proofgym validate``'s)."""
    concurrency = DEFAULTS.validate_workers(concurrency)
    if concurrency < 1:
        raise ConfigError(f"concurrency must be >= 1 (got {concurrency})")
    if grader_timeout_s is not None and not grader_timeout_s > 0:
        raise ConfigError(f"the grader timeout must be a number of seconds > 0 (got {grader_timeout_s:g})")
    env_kwargs = dict(env_kwargs or {})
    env = make_env(env_id, **env_kwargs)
    envs = [env]
    try:
        if env.tasks is None:
            raise ConfigError(f"{env_id!r} has no task set to validate")
        tasks = [env.tasks.get(t) for t in task_ids] if task_ids else list(env.tasks)
        if limit is not None:
            tasks = tasks[:limit]
        shared = {"tasks": env.tasks} if takes_tasks(env_id) and "tasks" not in env_kwargs else {}
        while len(envs) < min(concurrency, len(tasks)):
            envs.append(make_env(env_id, **env_kwargs, **shared))
        if on_start is not None:
            on_start(len(tasks))
        report = validate_env(envs, tasks, env_id=env_id, on_task=on_task, verifier=verifier,
                              grader_timeout_s=grader_timeout_s, controls=controls)
        report.env_kwargs = env_kwargs
        return report
    finally:
        for e in envs:
            e.close()
