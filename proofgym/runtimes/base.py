"""The runtime protocol: the transition substrate. It executes tool calls and knows nothing of
the task's objective or grading."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from proofgym.runtimes.artifact import Artifact
from proofgym.tools import ToolRegistry, ToolResult


@runtime_checkable
class Runtime(Protocol):
    """Where an episode's tool calls run.

    Invariants:
        * ``reset()`` gives a fresh episode state; nothing of the previous episode remains.
        * ``execute`` never raises for anything the agent can send: bad calls, tool failures and
          timeouts come back as a :class:`ToolResult` with an ``error_kind``.
        * ``tools.schemas()`` are exactly the schemas ``execute`` validates against.
        * ``snapshot()`` returns an immutable :class:`Artifact` that is independent of the runtime
          (later episodes cannot change it).
    """

    tools: ToolRegistry

    def reset(self) -> None: ...

    def execute(self, tool_name: str, tool_input: Any) -> ToolResult: ...

    def snapshot(self) -> Artifact: ...

    def close(self) -> None: ...

    def config(self) -> dict[str, Any]:
        """Everything about the runtime that changes behaviour (for the rollout contract)."""
        ...
