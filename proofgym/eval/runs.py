"""The provenance side of a run, shared by every episode loop (the synchronous one in ``runner``
and the concurrent orchestrator): the contract, the run store, resume, and the split checks.

A loop does::

    run = start_run(env, policy.describe(), env_id=..., split=..., seeds=..., out=..., resume=...)
    plan = run.pending(plan_episodes(run.task_ids, ...))   # what a resumed run still has to do
    ... write each finished trajectory to run.store (a TrajectorySink), ids from run.contract.id ...
    trajectories, summary = run.finish(trajectories, {"env_id": ..., ...})
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from proofgym.core import ConfigError
from proofgym.env import UniversalVerifiableEnv, VerificationJob
from proofgym.eval.metrics import summarize
from proofgym.eval.report import write_report
from proofgym.record import MAX_ATTEMPTS, RolloutContract, RunStore, Trajectory, stamp, trajectory_id_for
from proofgym.tasks import SplitManifest

if TYPE_CHECKING:
    from proofgym.eval.runner import EpisodeSpec
    from proofgym.verify.pool import VerifierPool


class TrainSplitWarning(UserWarning):
    """An evaluation ran on the train split: its numbers say nothing about generalisation."""


def train_split_warning(env_id: str) -> str:
    return (f"EVALUATING {env_id} ON THE TRAIN SPLIT: these tasks may have been trained on, so the "
            "numbers measure fit, not generalisation. Use --split heldout (or dev) for results.")


@dataclass
class Run:
    """A started run: its contract, its store (``None`` for an in-memory run), the task ids to
    plan over, how many episodes a resumed store already had, and the run's warnings."""

    env: UniversalVerifiableEnv
    contract: RolloutContract
    store: RunStore | None
    task_ids: list[str]
    done_before: int = 0
    warnings: list[str] = field(default_factory=list)
    planned: int | None = None

    def pending(self, plan: Iterable[EpisodeSpec]) -> list[EpisodeSpec]:
        """The planned episodes that the store does not hold finished yet: never run, or ended in
        an infrastructure error with attempts left (:data:`MAX_ATTEMPTS`, each one recorded)."""
        specs = list(plan)
        self.planned = len(specs)
        if self.store is None:
            return specs
        done, attempts = self.store.completed, self.store.attempts
        pending = []
        for s in specs:
            tid = trajectory_id_for(self.contract.id, s.task_id, s.attempt)
            if tid not in done and attempts.get(tid, 0) < MAX_ATTEMPTS:
                pending.append(s)
        return pending

    def close(self) -> None:
        if self.store is not None:
            self.store.close()

    def finish(self, trajectories: list[Trajectory], fields: Mapping[str, Any], *,
               time: Mapping[str, float] | None = None,
               ) -> tuple[list[Trajectory], dict[str, Any]]:
        """All the run's trajectories (a resumed store's included) and its summary, written to the
        store's ``summary.json``; ``time`` adds the run's own timings to the summary's ``time``
        (the episodes' sums), e.g. its grader pool's start-up."""
        if self.store is not None:
            trajectories = self.store.trajectories()
        else:  # the store stamps what it records; without one, stamp here
            assert self.env.tasks is not None
            for traj in trajectories:
                stamp(traj, self.contract.id, split=self.env.tasks.split_of(traj.task_id))
        split = self.contract["tasks"]["split"]
        summary = summarize(trajectories, {**fields, "contract_id": self.contract.id, "split": split,
                                           "warnings": self.warnings, "resumed_from": self.done_before,
                                           "planned": self.planned})
        summary["time"] = {**summary["time"], **(time or {})}
        if self.store is not None:
            self.store.write_summary(summary)
            write_report(self.store.root, trajectories=trajectories, summary=summary)
        return trajectories, summary


def regrade_failed_gradings(env: UniversalVerifiableEnv, store: RunStore,
                            pool: VerifierPool | None = None) -> int:
    """Grade again every finished episode of a resumed run whose grading failed (an error
    verdict: a grader that timed out on a busy host, a judge server that did not reply), from
    its stored trajectory and final state, through ``pool`` (the run's; else a pool of the default backend),
    and record it with the new verdict. How many."""
    from proofgym.verify.pool import pool_for  # the verifier side, needed only here
    from proofgym.verify.regrade import regrade_job

    assert env.tasks is not None
    planned = []
    for traj in store.trajectories():
        if traj.trajectory_id in store.ungraded:
            label, item = regrade_job(traj, env.tasks, None)
            if label is not None:  # else nothing to grade it from: left as it is
                planned.append((traj, item))
    if not planned:
        return 0
    with pool_for(pool) as grader:
        futures = [(traj, grader.submit(item, f"regrade/{traj.trajectory_id}")
                    if isinstance(item, VerificationJob) else None, item)
                   for traj, item in planned]
        for traj, future, item in futures:
            traj.verdict = future.result() if future is not None else item
            store.regrade(traj)
    return len(planned)


def start_run(env: UniversalVerifiableEnv, policy: Mapping[str, Any], *, env_id: str,
              env_kwargs: Mapping[str, Any] | None = None, split: str | None = None,
              seeds: Mapping[str, Any] | None = None, out: Path | None = None,
              resume: Path | None = None, verifiers: Mapping[str, Any] | None = None,
              splits: SplitManifest | Path | None = None,
              pool: VerifierPool | None = None) -> Run:
    """Build the contract and open the store: a new run in ``out``, or continue ``resume``
    (refused, naming the changes, when the contract differs). ``split="train"`` warns loudly.
    ``splits`` is a frozen split manifest (or its file) to use instead of the task set's default
    one; it must match the tasks' content hashes, and its burned tasks leave the held-out pool."""
    if env.tasks is None:
        raise ConfigError(f"{env_id!r} has no task set to evaluate on")
    if out is not None and resume is not None and Path(out).resolve() != Path(resume).resolve():
        raise ConfigError(f"resume={resume} continues the run in that directory; out={out} differs")
    if splits is not None:
        if not isinstance(splits, SplitManifest) and not Path(splits).is_file():
            raise ConfigError(f"split manifest {splits} does not exist; write one with "
                              "`proofgym splits freeze ENV --out FILE`")
        manifest = splits if isinstance(splits, SplitManifest) else SplitManifest.load(splits)
        env.tasks = env.tasks.with_splits(manifest)
    notes = []
    if split == "train":
        notes.append(train_split_warning(env_id))
        warnings.warn(notes[-1], TrainSplitWarning, stacklevel=3)
    task_ids = env.tasks.split(split).ids if split is not None else env.tasks.ids
    contract = RolloutContract.build(env, policy=policy, env_id=env_id, env_kwargs=env_kwargs,
                                     split=split, seeds=seeds, verifiers=verifiers)
    store = None
    if resume is not None:
        store = RunStore.resume(resume, contract, manifest=env.tasks.manifest)
        regrade_failed_gradings(env, store, pool)
    elif out is not None:
        store = RunStore.create(out, contract, manifest=env.tasks.manifest)
    return Run(env, contract, store, task_ids, len(store.completed) if store else 0, notes)
