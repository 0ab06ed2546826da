"""Run one episode: a thin call into the :class:`~proofgym.rollout.Orchestrator` at concurrency 1.

There is one episode loop (the orchestrator); this is its synchronous front door, for tests,
validation and notebooks. Ids, error records and grading are exactly those of a concurrent run.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from proofgym.core import Task
from proofgym.core.defaults import DEFAULTS
from proofgym.env import UniversalVerifiableEnv
from proofgym.record import Trajectory, trajectory_id_for
from proofgym.rollout.async_policy import AsyncPolicy
from proofgym.rollout.orchestrator import MAX_STEPS, Orchestrator, record_step
from proofgym.rollout.policies import Policy
from proofgym.verify.pool import VerifierPool

__all__ = ["MAX_STEPS", "record_step", "run_episode", "run_sync"]

T = TypeVar("T")


@dataclass(frozen=True)
class _OneEpisode:
    task_id: str
    attempt: int
    seed: int | None
    task: Task | None = None
    trajectory_id: str | None = None

    @property
    def key(self) -> str:
        if self.trajectory_id or not self.task_id:  # "": the env samples the task at reset
            return self.trajectory_id or ""
        return trajectory_id_for(None, self.task_id, self.attempt)


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion from synchronous code, even when an event loop is already
    running in this thread (a notebook, an async test): then it runs on a helper thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with cf.ThreadPoolExecutor(1, thread_name_prefix="proofgym-run-sync") as pool:
        return pool.submit(asyncio.run, coro).result()


def run_episode(env: UniversalVerifiableEnv, policy: Policy | AsyncPolicy, *, task: Task | None = None,
                task_id: str | None = None, seed: int | None = None,
                trajectory_id: str | None = None, env_id: str = "", verify: bool = True,
                verifier: VerifierPool | None = None) -> Trajectory:
    """Run one episode of ``policy`` in ``env`` and return its trajectory (``env`` stays open).

    The task is ``task``, else ``task_id`` from the env's task set, else one the env samples.
    A failure of the policy, the runtime or the task's dialogue logic does not escape: the
    trajectory gets ``status="error"`` with the reason and an ``unscored`` verdict. Grading goes
    through ``verifier`` (default: an ``inline`` :class:`VerifierPool`, as
    ``DEFAULTS.verifier_backend(one_call=True)`` says, so its timeout holds);
    grader failures are ``status="error"`` *verdicts* on an otherwise complete trajectory.
    """
    name = task.id if task is not None else (task_id or "")  # "": the env samples one at reset
    spec = _OneEpisode(name, 0, seed, task, trajectory_id)
    pool = verifier if verifier is not None else VerifierPool(DEFAULTS.verifier_backend(one_call=True))
    orchestrator = Orchestrator(lambda: env, policy, concurrency=1, verifier=pool, runtime_threads=0,
                                env_id=env_id, own_envs=False, grade=verify)
    try:
        (traj,) = run_sync(orchestrator.run([spec]))
    finally:
        if verifier is None:
            pool.close()
    return traj
