"""The trajectory record: one episode, traceable to its task, policy and grader."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from proofgym.core import AgentAction, Trace, TraceStep, Verdict, action_from_dict
from proofgym.version import __version__


@dataclass
class StepRecord:
    """One env step as recorded: the action, what came back, and how long each side took."""

    action: AgentAction
    observation: dict[str, Any]
    info: dict[str, Any] = field(default_factory=dict)
    policy_s: float = 0.0
    env_s: float = 0.0
    usage: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"action": self.action.to_dict(), "observation": self.observation, "info": self.info,
                "policy_s": self.policy_s, "env_s": self.env_s, "usage": self.usage}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StepRecord:
        return cls(action_from_dict(data["action"]), data["observation"], data.get("info", {}),
                   data.get("policy_s", 0.0), data.get("env_s", 0.0), data.get("usage", {}))


@dataclass
class Trajectory:
    """An episode: ids, the task and its content hash, every step, how it ended, and its verdict.

    Provenance: ``contract_id`` names the :class:`RolloutContract` the episode ran under,
    ``task_hash`` the exact task content, ``split`` the task's split (``train``, ``dev``,
    ``heldout`` or ``burned``); a run store fills the first and last when it records the episode.
    ``artifact`` is the frozen final state (``Artifact.to_dict()``) so the episode can be re-graded.

    Invariants: ``status == "ok"`` means the episode ran to termination or truncation and
    ``verdict`` grades it; ``status == "error"`` means the harness, policy server or runtime failed
    (``error`` says how) and the verdict is ``unscored``: an infrastructure failure is never a 0.
    """

    trajectory_id: str
    env_id: str
    task_id: str
    task_hash: str
    seed: int | None
    policy: dict[str, Any]
    prompt: str
    tools: list[dict[str, Any]]
    steps: list[StepRecord] = field(default_factory=list)
    terminated: bool = False
    truncated: bool = False
    truncation_reason: str | None = None
    verdict: Verdict | None = None
    status: str = "ok"
    error: str | None = None
    timings: dict[str, float] = field(default_factory=dict)
    proofgym_version: str = __version__
    extra: dict[str, Any] = field(default_factory=dict)
    contract_id: str | None = None
    split: str | None = None
    artifact: dict[str, Any] | None = None

    @property
    def reward(self) -> float | None:
        """The reward, or ``None`` when there is no scored verdict (never a silent 0)."""
        if self.verdict is None or not self.verdict.scored:
            return None
        return self.verdict.reward

    def trace(self) -> Trace:
        return Trace(TraceStep(s.action, s.observation) for s in self.steps)

    def to_dict(self) -> dict[str, Any]:
        return {
            "trajectory_id": self.trajectory_id, "env_id": self.env_id, "task_id": self.task_id,
            "task_hash": self.task_hash, "seed": self.seed, "policy": self.policy,
            "prompt": self.prompt, "tools": self.tools,
            "steps": [s.to_dict() for s in self.steps],
            "terminated": self.terminated, "truncated": self.truncated,
            "truncation_reason": self.truncation_reason,
            "verdict": self.verdict.to_dict() if self.verdict else None,
            "reward": self.reward, "status": self.status, "error": self.error,
            "timings": self.timings, "proofgym_version": self.proofgym_version, "extra": self.extra,
            "contract_id": self.contract_id, "split": self.split, "artifact": self.artifact,
        }

    def to_json(self) -> bytes:
        return orjson.dumps(self.to_dict(), default=_fallback, option=orjson.OPT_SERIALIZE_NUMPY)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Trajectory:
        data = dict(data)
        data.pop("reward", None)
        data["steps"] = [StepRecord.from_dict(s) for s in data.get("steps", [])]
        if data.get("verdict") is not None:
            data["verdict"] = Verdict.from_dict(data["verdict"])
        return cls(**data)


def _fallback(value: Any) -> Any:
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return repr(value)
