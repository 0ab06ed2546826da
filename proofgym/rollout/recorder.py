"""The episode model: one plan type, one step recorder, and the sinks episodes are delivered to.

Every front door records its episodes here: the orchestrator (``evaluate``, ``run_episode``,
the episode tier of ``proofgym serve``), the step tier's sessions and the TRL adapter.
:class:`EpisodePlan` says which episode to play, :class:`EpisodeRecorder` builds its
:class:`~proofgym.record.Trajectory` step by step (the grader's :class:`~proofgym.core.Trace` is
read from it), and a :class:`Sink` receives the finished record. ``tests/test_architecture.py``
checks that no other planned-episode type or step recorder exists in the library.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace
from typing import Any, Protocol

from proofgym.core import AgentAction, Task, Trace, Verdict
from proofgym.record import StepRecord, Trajectory, stamp, trajectory_id_for

__all__ = ["EpisodePlan", "EpisodeRecorder", "MemorySink", "Sink"]


@dataclass(frozen=True)
class EpisodePlan:
    """One planned episode: attempt ``attempt`` at task ``task_id``, reset with ``seed``.

    ``task`` plays that task object instead of looking ``task_id`` up; ``trajectory_id`` names a
    single episode (a caller's choice, kept when no contract derives one). An empty ``task_id``
    lets the env sample the task at reset.
    """

    task_id: str
    attempt: int = 0
    seed: int | None = None
    task: Task | None = None
    trajectory_id: str | None = None

    @property
    def key(self) -> str:
        """The episode's id before a contract is known (``TASK#ATTEMPT``; ``""``: not known yet)."""
        if self.trajectory_id or not self.task_id:
            return self.trajectory_id or ""
        return trajectory_id_for(None, self.task_id, self.attempt)


class EpisodeRecorder:
    """Builds one episode's :class:`Trajectory`: ids and provenance at the start, each step as it
    happens, how it ended, and its verdict. :meth:`trace` is the grader's view of the same steps."""

    def __init__(self, trajectory: Trajectory, *, group_size: int = 1) -> None:
        self.trajectory = trajectory
        self.group_size = group_size
        self.started = time.perf_counter()
        self.policy_s = 0.0
        self.env_s = 0.0

    @classmethod
    def start(cls, plan: EpisodePlan, *, env_id: str = "", policy: dict[str, Any] | None = None,
              task: Task | None = None, prompt: str = "", tools: list[dict[str, Any]] | None = None,
              contract_id: str | None = None, group_size: int = 1) -> EpisodeRecorder:
        """A recorder for ``plan``; ``task`` is the task the env reset to (``None``: the episode
        failed before it had one). Under ``contract_id`` the id is derived from the contract."""
        if task is not None and not plan.task_id:  # the env sampled the task: its id is known now
            plan = replace(plan, task_id=task.id)
        traj = Trajectory(trajectory_id=plan.key, env_id=env_id, task_id=plan.task_id,
                          task_hash=task.content_hash if task is not None else "", seed=plan.seed,
                          policy=dict(policy or {}), prompt=prompt, tools=list(tools or []))
        recorder = cls(traj, group_size=group_size)
        recorder.stamp(contract_id, plan.attempt)
        return recorder

    def stamp(self, contract_id: str | None, attempt: int) -> None:
        """The episode's provenance: its contract (and so its id), attempt and GRPO group."""
        traj = self.trajectory
        stamp(traj, contract_id, attempt=attempt)
        traj.extra["group"] = {"id": f"{traj.task_id}@{attempt // self.group_size}",
                               "index": attempt % self.group_size, "size": self.group_size}

    @property
    def trajectory_id(self) -> str:
        return self.trajectory.trajectory_id

    @property
    def steps(self) -> int:
        return len(self.trajectory.steps)

    def step(self, action: AgentAction, obs: dict[str, Any], terminated: bool = False,
             truncated: bool = False, info: dict[str, Any] | None = None, *, policy_s: float = 0.0,
             env_s: float = 0.0, usage: dict[str, Any] | None = None) -> bool:
        """Record one step; True when it ended the episode."""
        info = info or {}
        traj = self.trajectory
        traj.steps.append(StepRecord(action, obs, info, policy_s, env_s, usage or {}))
        self.policy_s += policy_s
        self.env_s += env_s
        if terminated or truncated:
            traj.terminated, traj.truncated = bool(terminated), bool(truncated)
            traj.truncation_reason = info.get("truncation_reason")
            return True
        return False

    def trace(self) -> Trace:
        """The steps as the graders see them (action and observation of each)."""
        return self.trajectory.trace()

    def finish(self) -> Trajectory:
        """The episode ran to its end: its timings (grading time is booked when it is graded)."""
        self.trajectory.timings = {"policy_s": self.policy_s, "env_s": self.env_s, "verify_s": 0.0,
                                   "total_s": time.perf_counter() - self.started}
        return self.trajectory

    def fail(self, error: str) -> Trajectory:
        """The episode failed (harness, policy server, runtime): an error record, never a 0."""
        traj = self.finish()
        traj.status, traj.error = "error", error
        traj.verdict = Verdict.unscored(f"episode failed: {error}")
        return traj

    def policy_version(self, version: str | int | None, *, age: int | None = None) -> None:
        """The policy version the episode was sampled with, and its age in versions (the newest
        version seen when it was recorded, minus its own) when versions are training steps."""
        if version is not None:
            self.trajectory.policy["version"] = str(version)
        if age is not None:
            self.trajectory.extra["age"] = age


class Sink(Protocol):
    """Where delivered trajectories go (a :class:`~proofgym.record.RunStore` is one)."""

    def write(self, trajectory: Trajectory) -> None: ...


class MemorySink:
    """Keeps every delivered trajectory in :attr:`trajectories` (thread-safe)."""

    def __init__(self) -> None:
        self.trajectories: list[Trajectory] = []
        self._lock = threading.Lock()

    def write(self, trajectory: Trajectory) -> None:
        with self._lock:
            self.trajectories.append(trajectory)

    def close(self) -> None:
        pass
