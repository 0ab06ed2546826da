"""Recording for front doors without a plan of their own: served sessions and TRL rollouts.

``evaluate`` plans its episodes up front; a trainer starts them one reset at a time. A
:class:`Recording` plans each such episode as it starts (the next attempt at its task, so its id
comes from :mod:`proofgym.record.ids`), stamps the policy version the trainer reports and the
episode's age in versions, and delivers the graded record to its sink: a run directory
(:meth:`Recording.to_run_dir`, read by ``proofgym show``, ``audit``, ``export``, ``compare`` like an
evaluation's), memory, or nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from proofgym.core import Verdict
from proofgym.env import UniversalVerifiableEnv
from proofgym.record import RolloutContract, RunStore, Trajectory
from proofgym.rollout.recorder import EpisodePlan, EpisodeRecorder, Sink

__all__ = ["Recording"]


class Recording:
    """Plans, stamps and delivers the episodes of one front door (see the module docstring).

    Args:
        sink: Where graded episodes go (``None``: nowhere; ids and versions are still given).
        contract: The run's contract (ids are ``CONTRACT/TASK#ATTEMPT`` under it).
        env_id: Recorded on every trajectory.
        policy: The contract's policy entry; each trajectory gets it with its own ``version``.
    """

    def __init__(self, sink: Sink | None = None, *, contract: RolloutContract | None = None,
                 env_id: str = "", policy: Mapping[str, Any] | None = None) -> None:
        self.sink = sink
        self.contract = contract
        self.env_id = env_id
        self.policy = dict(policy or {})
        self.latest_version: int | None = None
        self.delivered = 0
        self._attempts: dict[str, int] = {}
        self._lock = threading.Lock()

    @classmethod
    def to_run_dir(cls, root: str | Path, env: UniversalVerifiableEnv, *, env_id: str,
                   policy: Mapping[str, Any], env_kwargs: Mapping[str, Any] | None = None,
                   split: str | None = None) -> Recording:
        """A new run directory in ``root`` (``contract.json`` with ``policy`` naming how the
        trainer versions its policy, ``splits.json``, then each graded episode as it lands)."""
        contract = RolloutContract.build(env, policy=policy, env_id=env_id, env_kwargs=env_kwargs,
                                         split=split, seeds={"planned_by": "trainer"})
        manifest = env.tasks.manifest if env.tasks is not None else None
        store = RunStore.create(root, contract, manifest=manifest)
        return cls(store, contract=contract, env_id=env_id, policy=policy)

    @property
    def contract_id(self) -> str | None:
        return self.contract.id if self.contract is not None else None

    def plan(self, task_id: str, seed: int | None = None) -> EpisodePlan:
        """The next episode at ``task_id``: the next attempt at it in this recording."""
        with self._lock:
            attempt = self._attempts.get(task_id, 0)
            self._attempts[task_id] = attempt + 1
        return EpisodePlan(task_id, attempt, seed)

    def begin(self, env: UniversalVerifiableEnv, info: Mapping[str, Any], *, seed: int | None = None,
              policy_version: str | int | None = None) -> EpisodeRecorder:
        """Start recording the episode ``env`` was just reset to (``info``: what the reset returned)."""
        task, spec = env.current_task, env.current_spec
        assert task is not None and spec is not None
        tools = list(info.get("tools") or spec.tools or [])
        recorder = EpisodeRecorder.start(self.plan(task.id, seed), env_id=self.env_id, policy=self.policy,
                                         task=task, prompt=spec.prompt, tools=tools,
                                         contract_id=self.contract_id)
        self.note_version(policy_version)
        recorder.policy_version(policy_version)
        return recorder

    def note_version(self, version: str | int | None) -> None:
        """The trainer's policy is at ``version`` now (ages are counted against the newest)."""
        step = _step(version)
        if step is not None:
            with self._lock:
                self.latest_version = step if self.latest_version is None else max(self.latest_version, step)

    def deliver(self, recorder: EpisodeRecorder, verdict: Verdict | None, *,
                artifact: dict[str, Any] | None = None, verifier: dict[str, Any] | None = None,
                verify_s: float = 0.0) -> Trajectory:
        """Record the finished, graded episode in the sink. A sink that cannot write raises: a
        run asked to record does not go on unrecorded."""
        traj = recorder.finish() if not recorder.trajectory.timings else recorder.trajectory
        if traj.status == "ok":
            traj.verdict = verdict
        traj.timings["verify_s"] = verify_s
        if artifact is not None:
            traj.artifact = artifact
        if verifier is not None:
            traj.extra["verifier"] = verifier
        own = _step(traj.policy.get("version"))
        latest = self.latest_version
        if own is not None and latest is not None:
            recorder.policy_version(None, age=latest - own)
        if self.sink is not None:
            self.sink.write(traj)
        self.delivered += 1
        return traj

    def close(self) -> None:
        close = getattr(self.sink, "close", None)
        if close is not None:
            close()


def _step(version: Any) -> int | None:
    """A policy version as a training step, when it is one."""
    text = str(version) if version is not None else ""
    return int(text) if text.lstrip("-").isdigit() else None
