"""``proofgym-testing/SleepyArith-v0``: Arith whose every ``step`` first sleeps ``step_s`` seconds.

A stand-in for an I/O-bound env (a remote sandbox, a slow tool): the Ray tests kill a node while
episodes sit in a step, and ``bench/ray_scale.py`` measures how throughput follows the slots.
A Ray worker builds it from the id ``proofgym.testing.sleepy:proofgym-testing/SleepyArith-v0``
(Gymnasium imports the module named before the colon, which registers the env there too).
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any

import gymnasium

from proofgym.core import Limits, TraceStep
from proofgym.env import UniversalVerifiableEnv
from proofgym.envs.arith import arith_tasks, calculator
from proofgym.runtimes import InProcessRuntime
from proofgym.tasks import TaskSet

ENV_ID = "proofgym-testing/SleepyArith-v0"
#: The id that also works in a fresh process (a Ray worker): it names the registering module.
IMPORTABLE_ID = f"{__name__}:{ENV_ID}"


class SleepyEnv(UniversalVerifiableEnv):
    def __init__(self, *args: Any, step_s: float = 0.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.step_s = step_s

    def step(self, action: Any) -> Any:
        time.sleep(self.step_s)
        return super().step(action)


def make_env(step_s: float = 0.1, n_tasks: int = 50, seed: int = 0,
             tasks: TaskSet | None = None) -> SleepyEnv:
    runtime = InProcessRuntime([calculator], timeout_s=5.0)
    tasks = tasks if tasks is not None else arith_tasks(n_tasks, seed=seed)
    return SleepyEnv(runtime, tasks=tasks, limits=Limits(max_turns=1, max_tool_calls=64), step_s=step_s)


if ENV_ID not in gymnasium.registry:
    gymnasium.register(ENV_ID, entry_point=make_env)


class SlowGradedTask:
    """A task whose grading first sleeps ``grade_s`` seconds (the grading side of an I/O-bound
    env: a remote test runner), or, with ``crash``, kills the process grading it; everything else
    is the wrapped task's."""

    def __init__(self, inner: Any, grade_s: float, crash: bool = False) -> None:
        self.inner = inner
        self.grade_s = grade_s
        self.crash = crash

    def __getattr__(self, name: str) -> Any:
        if name in ("inner", "grade_s", "crash"):  # not set yet (unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)

    def verify(self, trace: Any, runtime: Any) -> Any:
        time.sleep(self.grade_s)
        if self.crash:
            os._exit(3)
        return self.inner.verify(trace, runtime)


def slow_grading_jobs(n: int, *, grade_s: float, crash: bool = False) -> list[Any]:
    """``n`` distinct verification jobs of correct answers, each taking ``grade_s`` to grade (and
    then killing its grader's process, with ``crash``)."""
    from proofgym.rollout import ReferencePolicy

    env = make_env(step_s=0.0, n_tasks=n)
    jobs = []
    try:
        for task in env.tasks:
            obs, info = env.reset(options={"task": task})
            policy = ReferencePolicy()
            policy.start(task, obs, info, env.action_space)
            trace = []
            done = False
            while not done:
                action = policy.act(obs)
                obs, _, terminated, truncated, info = env.step(action)
                trace.append((action, obs))
                done = terminated or truncated
            job = env.verification_job([TraceStep(a, o) for a, o in trace])
            jobs.append(dataclasses.replace(job, task=SlowGradedTask(job.task, grade_s, crash)))
    finally:
        env.close()
    return jobs
