"""The agent's actions: a tool call (step boundary) or the end of its turn (turn boundary)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from proofgym.core.errors import ConfigError


@dataclass(frozen=True)
class ToolCallAction:
    """Call ``tool_name`` with ``tool_input``.

    ``tool_input`` should be a JSON object (a ``dict``). Anything else is still a well-formed
    *action*: the environment answers it with an ``invalid_arguments`` error observation, because
    models do emit malformed calls and training must see the consequence. A ``str`` is parsed as
    JSON first, which is how most servers deliver arguments.
    """

    tool_name: str
    tool_input: Any = field(default_factory=dict)
    call_id: str | None = None

    def __eq__(self, other: object) -> bool:
        # call_id is transport bookkeeping, not part of what the agent did.
        if not isinstance(other, ToolCallAction):
            return NotImplemented
        return self.tool_name == other.tool_name and self.tool_input == other.tool_input

    def __hash__(self) -> int:
        # Equal actions must hash equal: dicts equal in another key order have another repr.
        return hash((self.tool_name, _canonical(self.tool_input)))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "tool_call", "tool_name": self.tool_name, "tool_input": self.tool_input,
                "call_id": self.call_id}


@dataclass(frozen=True)
class TurnCompleteAction:
    """End the agent's turn with ``message`` (for a single-turn task: the final answer)."""

    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "turn_complete", "message": self.message}


AgentAction = ToolCallAction | TurnCompleteAction


def _canonical(value: Any) -> Any:
    """A hashable form of ``value`` that is the same for equal values (dict key order ignored)."""
    if isinstance(value, dict):
        return ("dict", frozenset((_canonical(k), _canonical(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return ("seq", tuple(_canonical(v) for v in value))
    try:
        hash(value)
    except TypeError:
        return ("repr", repr(value))
    return value


def action_from_dict(data: dict[str, Any]) -> AgentAction:
    """Inverse of ``to_dict``; used to read actions back from trajectory records."""
    kind = data.get("kind")
    if kind == "tool_call":
        return ToolCallAction(data["tool_name"], data.get("tool_input", {}), data.get("call_id"))
    if kind == "turn_complete":
        return TurnCompleteAction(data["message"])
    raise ConfigError(f"not an action record (kind={kind!r}); expected 'tool_call' or 'turn_complete'")
