"""The one synchronous door into the episode loop, and ``run_episode`` on top of it.

There is one episode loop (the :class:`~proofgym.rollout.Orchestrator`); :func:`play_plan` runs a
plan through it at concurrency 1 in one env the caller keeps (``evaluate`` at ``-c 1``,
``run_episode``, validation, notebooks), and :func:`play_plan_async` is the same from a running
event loop (the episode tier of ``proofgym serve``). Ids, error records and grading are exactly
those of a concurrent run.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, TypeVar

from proofgym.core import Task
from proofgym.core.defaults import DEFAULTS
from proofgym.env import UniversalVerifiableEnv
from proofgym.record import Trajectory
from proofgym.rollout.async_policy import AsyncPolicy
from proofgym.rollout.orchestrator import MAX_STEPS, Orchestrator
from proofgym.rollout.policies import Policy
from proofgym.rollout.recorder import EpisodePlan, Sink
from proofgym.verify.pool import VerifierPool

__all__ = ["MAX_STEPS", "play_plan", "play_plan_async", "run_episode", "run_sync"]

T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion from synchronous code, even when an event loop is already
    running in this thread (a notebook, an async test): then it runs on a helper thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with cf.ThreadPoolExecutor(1, thread_name_prefix="proofgym-run-sync") as pool:
        return pool.submit(asyncio.run, coro).result()


async def play_plan_async(env: UniversalVerifiableEnv, policy: Policy | AsyncPolicy,
                          plan: Iterable[EpisodePlan], *, verifier: VerifierPool, env_id: str = "",
                          sink: Sink | None = None, on_episode: Callable[[Trajectory], None] | None = None,
                          contract_id: str | None = None, grade: bool = True) -> list[Trajectory]:
    """The planned episodes one after another in ``env`` (which stays open), graded by ``verifier``."""
    orchestrator = Orchestrator(lambda: env, policy, concurrency=1, verifier=verifier, runtime_threads=0,
                                env_id=env_id, contract_id=contract_id, own_envs=False, grade=grade)
    return await orchestrator.run(list(plan), sink=sink, on_episode=on_episode)


def play_plan(env: UniversalVerifiableEnv, policy: Policy | AsyncPolicy, plan: Iterable[EpisodePlan], *,
              env_id: str = "", sink: Sink | None = None,
              on_episode: Callable[[Trajectory], None] | None = None, contract_id: str | None = None,
              verifier: VerifierPool | None = None, grade: bool = True) -> list[Trajectory]:
    """The synchronous door: :func:`play_plan_async` from synchronous code. Grading goes through
    ``verifier`` (default: the one-call backend, ``DEFAULTS.verifier_backend(one_call=True)``)."""
    pool = verifier if verifier is not None else VerifierPool(DEFAULTS.verifier_backend(one_call=True))
    try:
        return run_sync(play_plan_async(env, policy, plan, verifier=pool, env_id=env_id, sink=sink,
                                        on_episode=on_episode, contract_id=contract_id, grade=grade))
    finally:
        if verifier is None:
            pool.close()


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
    plan = EpisodePlan(name, 0, seed, task, trajectory_id)
    (traj,) = play_plan(env, policy, [plan], env_id=env_id, verifier=verifier, grade=verify)
    return traj
