"""The trace handed to a grader: what the agent did and what it saw, in order."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, overload

from proofgym.core.actions import AgentAction, ToolCallAction, TurnCompleteAction, action_from_dict


@dataclass(frozen=True)
class TraceStep:
    """One ``env.step``: the action and the observation dict the env returned for it."""

    action: AgentAction
    observation: Mapping[str, Any]

    @property
    def observation_type(self) -> str:
        return str(self.observation.get("type", ""))

    def to_dict(self) -> dict[str, Any]:
        return {"action": self.action.to_dict(), "obs": dict(self.observation)}


class Trace:
    """An immutable sequence of :class:`TraceStep`.

    The environment never accumulates it (DESIGN.md: the env stays stateless between steps); the
    rollout harness builds it and passes it to ``verify``. It also accepts the seed's form, a list of
    ``{"action": ..., "obs": ...}`` dicts, so hand-written harness code keeps working.
    """

    __slots__ = ("_steps",)

    def __init__(self, steps: Iterable[TraceStep | Mapping[str, Any]] = ()) -> None:
        self._steps: tuple[TraceStep, ...] = tuple(_coerce_step(s) for s in steps)

    @classmethod
    def coerce(cls, trace: Trace | Iterable[Any]) -> Trace:
        return trace if isinstance(trace, Trace) else cls(trace)

    def __len__(self) -> int:
        return len(self._steps)

    def __iter__(self) -> Iterator[TraceStep]:
        return iter(self._steps)

    @overload
    def __getitem__(self, index: int) -> TraceStep: ...
    @overload
    def __getitem__(self, index: slice) -> Trace: ...
    def __getitem__(self, index: int | slice) -> TraceStep | Trace:
        if isinstance(index, slice):
            return Trace(self._steps[index])
        return self._steps[index]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Trace) and self._steps == other._steps

    def __repr__(self) -> str:
        return f"Trace({len(self)} steps)"

    @property
    def actions(self) -> list[AgentAction]:
        return [s.action for s in self._steps]

    def tool_calls(self) -> list[ToolCallAction]:
        return [s.action for s in self._steps if isinstance(s.action, ToolCallAction)]

    def messages(self) -> list[str]:
        """The agent's turn-ending messages, in order."""
        return [s.action.message for s in self._steps if isinstance(s.action, TurnCompleteAction)]

    def final_message(self) -> str | None:
        """The last turn-ending message (a single-turn task's answer), or ``None``."""
        messages = self.messages()
        return messages[-1] if messages else None

    def to_list(self) -> list[dict[str, Any]]:
        return [s.to_dict() for s in self._steps]


def _coerce_step(step: TraceStep | Mapping[str, Any]) -> TraceStep:
    if isinstance(step, TraceStep):
        return step
    if isinstance(step, Mapping) and "action" in step:
        action = step["action"]
        if isinstance(action, Mapping):
            action = action_from_dict(dict(action))
        if not isinstance(action, (ToolCallAction, TurnCompleteAction)):
            raise TypeError(f"trace step action must be an AgentAction, got {type(action).__name__}")
        obs = step.get("obs", step.get("observation", {}))
        return TraceStep(action, dict(obs) if isinstance(obs, Mapping) else {"observation": obs})
    raise TypeError(
        f"cannot read a trace step from {type(step).__name__}; "
        "use TraceStep(action, observation) or {'action': ..., 'obs': ...}"
    )
