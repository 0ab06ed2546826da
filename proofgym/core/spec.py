"""What the agent is shown at the start of an episode."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TaskSpec:
    """The task as the agent sees it.

    Attributes:
        prompt: The first message of the episode.
        tools: OpenAI function-calling schemas of the tools the runtime really has for this task.
            Leave it ``None`` in :meth:`Task.get_spec`: the environment fills it from the runtime's
            :class:`~proofgym.tools.ToolRegistry`, so schemas are never written twice. A task that
            sets it must set exactly the runtime's schemas, or ``reset`` raises.
        metadata: Free-form, JSON-serialisable facts about the task (difficulty, source, ...). Never
            put the expected answer here: metadata is shown to the policy.
    """

    prompt: str
    tools: list[dict[str, Any]] | None = None
    metadata: dict[str, Any] | None = None
