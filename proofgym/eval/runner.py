"""Evaluate a policy on an env: the library behind ``proofgym eval``.

A run is a *plan* (which task, which attempt, which seed) executed by the one episode loop, the
:class:`~proofgym.rollout.Orchestrator` (at concurrency 1 for a synchronous run), with every
finished trajectory handed to a *sink* as soon as it exists, so the sink can be a crash-safe run
store without the loop knowing about it.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

import gymnasium

from proofgym.core import ConfigError
from proofgym.core.defaults import DEFAULTS
from proofgym.core.errors import ErrorBudgetExceeded, RunFailedError
from proofgym.env import UniversalVerifiableEnv
from proofgym.eval.runs import start_run
from proofgym.make import make_env, takes_tasks
from proofgym.record import Trajectory
from proofgym.rollout import AsyncPolicy, Orchestrator, Policy
from proofgym.rollout.episode import play_plan, run_sync
from proofgym.rollout.progress import RunProgress
from proofgym.rollout.recorder import EpisodePlan
from proofgym.rollout.slots import LocalSlots, SlotBackend
from proofgym.tasks.sampling import stratified_sample
from proofgym.verify.pool import VerifierPool

#: One planned episode of a run: the library's one plan type, under its evaluation name.
EpisodeSpec = EpisodePlan


def plan_episodes(task_ids: Sequence[str], *, episodes: int | None = None, repeats: int = 1,
                  seed: int = 0) -> list[EpisodeSpec]:
    """The episodes of a run, in a deterministic order.

    With ``episodes``, tasks are taken in order (``i mod len(tasks)``), so ``-n len(tasks)``
    covers every task once; otherwise every task ``repeats`` times. Episode ``i`` is reset with
    seed ``seed + i``.
    """
    if not task_ids:
        raise ConfigError("no tasks to plan: the task set (or the chosen split) is empty")
    if episodes is not None and episodes < 1:
        raise ConfigError(f"episodes must be >= 1 (got {episodes})")
    if repeats < 1:
        raise ConfigError(f"repeats must be >= 1 (got {repeats})")
    if episodes is None:
        order = [(tid, a) for tid in task_ids for a in range(repeats)]
    else:
        order = []
        for i in range(episodes):
            tid = task_ids[i % len(task_ids)]
            order.append((tid, (i // len(task_ids)) * repeats))
        if repeats > 1:
            order = [(tid, base + r) for tid, base in order for r in range(repeats)]
    return [EpisodeSpec(tid, attempt, seed + i) for i, (tid, attempt) in enumerate(order)]


class TrajectorySink(Protocol):
    """Where finished trajectories go, one at a time, as they complete."""

    def write(self, trajectory: Trajectory) -> None: ...

    def close(self) -> None: ...


class JsonlSink:
    """Appends each trajectory to ``DIR/trajectories.jsonl``, flushed when written."""

    def __init__(self, out: Path) -> None:
        out.mkdir(parents=True, exist_ok=True)
        self.path = out / "trajectories.jsonl"
        self._file = self.path.open("wb")

    def write(self, trajectory: Trajectory) -> None:
        self._file.write(trajectory.to_json() + b"\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def run_plan(env: UniversalVerifiableEnv, policy: Policy | AsyncPolicy, plan: Iterable[EpisodeSpec], *,
             env_id: str = "", sink: TrajectorySink | None = None,
             on_episode: Callable[[Trajectory], None] | None = None,
             contract_id: str | None = None, verifier: VerifierPool | None = None) -> list[Trajectory]:
    """Run the planned episodes one after another in ``env`` (the orchestrator at concurrency 1;
    ``env`` stays open). Grading goes through ``verifier`` (default: a pool of the default
    backend, :meth:`~proofgym.core.defaults.RunDefaults.verifier_backend`)."""
    pool = verifier if verifier is not None else VerifierPool()
    try:
        return play_plan(env, policy, plan, env_id=env_id, sink=sink, on_episode=on_episode,
                         contract_id=contract_id, verifier=pool)
    finally:
        if verifier is None:
            pool.close()


def evaluate(env_id: str, policy: Policy | AsyncPolicy, *, episodes: int | None = None,
             repeats: int = DEFAULTS.repeats, seed: int = DEFAULTS.seed, out: Path | None = None,
             env_kwargs: dict[str, Any] | None = None,
             on_episode: Callable[[Trajectory], None] | None = None,
             concurrency: int = DEFAULTS.concurrency,
             verifier: str | VerifierPool | None = None, progress: bool | RunProgress = False,
             resume: Path | None = None, split: str | None = None, splits: Path | None = None,
             backend: str | SlotBackend = "local", ray_address: str | None = None,
             env_factory: Callable[[], UniversalVerifiableEnv] | None = None,
             sample: int | None = None, grader_timeout_s: float = DEFAULTS.grader_timeout_s,
             grader_processes: int | None = None, grader_jobs: int | None = None,
             max_error_rate: float | None = DEFAULTS.max_error_rate,
             ) -> tuple[list[Trajectory], dict[str, Any]]:
    """Run a policy on ``env_id`` and summarise.

    With ``out``, a new run directory (a :class:`RunStore`: ``contract.json``, ``splits.json``,
    ``trajectories.jsonl`` with each record fsynced as it completes, ``summary.json``). With
    ``resume``, continue the run in that directory: its finished episodes are kept and only the
    rest run; a different contract is refused. ``split`` restricts the plan to one split of the
    task set (``train`` warns loudly and is recorded in the contract and summary); ``splits`` a
    frozen split manifest file to take the splits from. ``sample`` runs ``sample`` distinct tasks
    (of the split, if one is given) drawn with ``seed`` evenly across the tasks' groups
    (:func:`~proofgym.tasks.sampling.stratified_sample`: a RepoRepair sample covers projects
    evenly), each ``repeats`` times; it is recorded in the contract's seeds.

    Episodes run in the :class:`~proofgym.rollout.Orchestrator` at every concurrency (one env per
    slot), graded by ``verifier`` (``"process"``, ``"ray"``, ``"inline"`` or a
    :class:`VerifierPool`, whose timeout and isolation hold at every concurrency). The default is
    ``proofgym eval``'s, :meth:`~proofgym.core.defaults.RunDefaults.verifier_backend`: a
    ``process`` pool (``ray`` with Ray slots); its worker processes re-import a script's
    ``__main__``, so a script needs an ``if __name__ == "__main__":`` guard (or passes
    ``verifier="inline"``). A pool made here has ``grader_processes`` workers (default: the CPU
    count), ``grader_jobs`` jobs in flight (default: the CPU count) and a ``grader_timeout_s``
    limit per grading.

    The run fails as a whole, after its directory is written, with
    :class:`~proofgym.errors.RunFailedError` when every episode ended in an error,
    and with its subclass :class:`~proofgym.errors.ErrorBudgetExceeded` when the
    share of unscored episodes (``summary["error_rate"]``) is over ``max_error_rate`` (``None``:
    no budget); both carry ``trajectories`` and ``summary``.

    ``backend`` is where env slots live: ``"local"`` (this process), ``"ray"`` (Ray actors on the
    cluster at ``ray_address``, where a ``ray`` pool made here grades too; placement options through a
    :class:`~proofgym.rollout.ray_slots.RaySlots` passed as ``backend``). The backend is not part
    of the run's contract: a run resumed on another backend continues the same run.

    ``env_factory`` builds the envs instead of ``make_env(env_id, **env_kwargs)`` (one per slot),
    e.g. a :class:`~proofgym.remote.RemoteEnv` over ``proofgym serve``; ``env_id`` and
    ``env_kwargs`` are still what the contract records.
    """
    slots = _slot_backend(backend, ray_address, graders_on_ray=verifier == "ray")
    if verifier is None:
        verifier = DEFAULTS.verifier_backend(slots.name)  # with Ray slots, graders on the cluster too
    if sample is not None and episodes is not None:
        raise ConfigError("episodes and sample both choose the tasks of a run: give one")
    if not grader_timeout_s > 0:
        raise ConfigError(f"the grader timeout must be a number of seconds > 0 (got {grader_timeout_s:g})")
    if max_error_rate is not None and not 0.0 <= max_error_rate <= 1.0:
        raise ConfigError(f"max_error_rate must be in [0, 1] (got {max_error_rate:g})")
    env = make_env(env_factory) if env_factory is not None else make_env(env_id, **(env_kwargs or {}))
    # A served env's verdicts come with its episodes (settled jobs): an inline pool answers them,
    # and no grader worker starts here, whatever pool the caller has.
    own_pool = isinstance(verifier, str) or env.grades_itself
    if env.grades_itself:
        pool = VerifierPool(DEFAULTS.verifier_backend(settled=True))
    else:
        pool = (VerifierPool(verifier, processes=grader_processes, max_in_flight=grader_jobs,  # type: ignore[arg-type]
                             timeout_s=grader_timeout_s,
                             ray_address=ray_address if verifier == "ray" else None,
                             boot=False)  # booted below, knowing the graders' modules
                if isinstance(verifier, str) else verifier)
        pool.start(_grader_modules(env_id))  # its workers boot while the run starts, off the verdicts' path
    try:
        run = start_run(env, policy.describe(), env_id=env_id, env_kwargs=env_kwargs, split=split,
                        seeds={"seed": seed, "episodes": episodes, "repeats": repeats,
                               **({"sample": sample} if sample is not None else {})},
                        out=out, resume=resume, splits=splits, pool=pool)
        try:
            task_ids = run.task_ids
            if sample is not None:
                task_ids = stratified_sample([env.tasks.get(t) for t in task_ids], sample, seed=seed)
            plan = run.pending(plan_episodes(task_ids, episodes=episodes, repeats=repeats, seed=seed))
            trajectories = _run(env, env_id, policy, plan, sink=run.store, on_episode=on_episode,
                                concurrency=concurrency, verifier=pool, group_size=repeats,
                                env_kwargs=env_kwargs or {}, progress=progress,
                                contract_id=run.contract.id, slots=slots, env_factory=env_factory)
        finally:
            run.close()
    finally:
        env.close()
        if own_pool:
            pool.close()
    # the pool's start-up, apart: it is no episode's grading time (verify_s books only jobs' runs)
    result = run.finish(trajectories, {"env_id": env_id, "policy": policy.describe(), "seed": seed,
                                       "concurrency": concurrency},
                        time={} if pool.startup_s is None else {"verifier_startup_s": pool.startup_s})
    judge_run(*result, max_error_rate=max_error_rate)
    return result


def judge_run(trajectories: Sequence[Trajectory], summary: dict[str, Any], *,
              max_error_rate: float | None = DEFAULTS.max_error_rate) -> None:
    """Raise :class:`RunFailedError` when every episode of a finished run ended in an error, and
    :class:`ErrorBudgetExceeded` when more of its episodes went unscored than ``max_error_rate``
    allows; else return."""
    failed = [t for t in trajectories if t.status == "error"]
    if trajectories and len(failed) == len(trajectories):
        raise RunFailedError(f"every episode ({len(failed)}) ended in an error, e.g.: "
                             f"{_first_line(failed[0].error)}", trajectories=trajectories, summary=summary)
    error_rate = summary.get("error_rate") or 0.0
    if max_error_rate is not None and error_rate > max_error_rate:
        raise ErrorBudgetExceeded(
            f"{error_rate:.1%} of the episodes were not scored (grader or episode errors), over "
            f"max_error_rate {max_error_rate:.1%}; mean_reward {summary.get('mean_reward')} leaves them "
            f"out, mean_reward_all {summary.get('mean_reward_all')} counts them as 0. See verify_errors "
            "and episode_errors in summary.json for the causes.",
            error_rate=error_rate, max_error_rate=max_error_rate, trajectories=trajectories, summary=summary)


def _first_line(text: str | None) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else "unknown error"
    return line if len(line) <= 300 else line[:300] + "..."


def _run(first_env: UniversalVerifiableEnv, env_id: str, policy: Policy | AsyncPolicy,
         plan: list[EpisodeSpec], *, sink: TrajectorySink | None,
         on_episode: Callable[[Trajectory], None] | None, concurrency: int,
         verifier: VerifierPool, group_size: int, env_kwargs: dict[str, Any],
         progress: bool | RunProgress, contract_id: str, slots: SlotBackend,
         env_factory: Callable[[], UniversalVerifiableEnv] | None = None) -> list[Trajectory]:
    spare = [first_env]  # the env built to plan the run serves as the first slot's env
    # Task sets are built once per run: a factory that takes `tasks=` gets the first env's.
    shared = ({"tasks": first_env.tasks} if env_factory is None and takes_tasks(env_id)
              and "tasks" not in env_kwargs else {})
    given = env_factory

    def local_factory() -> UniversalVerifiableEnv:
        if spare:
            return spare.pop()
        return make_env(given) if given is not None else make_env(env_id, **env_kwargs, **shared)

    # Remote slots build their envs where they run, from a factory that pickles by reference.
    env_factory = (local_factory if isinstance(slots, LocalSlots)
                   else given or functools.partial(make_env, env_id, **env_kwargs, **shared))

    orchestrator = Orchestrator(env_factory, policy, concurrency=concurrency, verifier=verifier,
                                group_size=group_size, env_id=env_id, progress=progress,
                                contract_id=contract_id, slots=slots,
                                # one episode at a time: runtime calls need no thread hand-off
                                runtime_threads=0 if concurrency == 1 else None)

    async def run() -> list[Trajectory]:
        try:
            return await orchestrator.run(plan, sink=sink, on_episode=on_episode)
        finally:
            close = getattr(policy, "aclose", None)
            if close is not None:  # the policy's HTTP client belongs to this event loop
                await close()

    return run_sync(run())


def _grader_modules(env_id: str) -> list[str]:
    """The module of ``env_id``'s factory: a pool's workers import it (and with it the env's
    task classes) before they take jobs, so no job's clock pays for that import."""
    with contextlib.suppress(gymnasium.error.Error):
        entry = gymnasium.spec(env_id).entry_point
        entry = getattr(entry, "entry_point", entry)  # a bundled env's factory names its module
        module = entry.split(":")[0] if isinstance(entry, str) else getattr(entry, "__module__", None)
        return [module] if module else []
    return []


def _slot_backend(backend: str | SlotBackend, ray_address: str | None, *,
                  graders_on_ray: bool = False) -> SlotBackend:
    if not isinstance(backend, str):
        return backend
    if backend == "local":
        if ray_address is not None and not graders_on_ray:
            raise ConfigError("ray_address is for backend='ray' or verifier='ray'")
        return LocalSlots()
    if backend == "ray":
        from proofgym.rollout.ray_slots import RaySlots

        return RaySlots(address=ray_address)
    raise ConfigError(f"unknown backend {backend!r}; use 'local' or 'ray'")

