"""Episode budgets. Running out of one *truncates* an episode; it never terminates it."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from proofgym.core.errors import ConfigError


@dataclass(frozen=True)
class Limits:
    """Per-episode budgets; ``None`` means unlimited.

    Attributes:
        max_turns: Turn boundaries (``TurnCompleteAction``) before truncation with ``"turns"``.
        max_tool_calls: Tool calls allowed; the call past the budget is not executed and the
            episode is truncated with ``"tool_calls"``.
        max_wall_time_s: Seconds since ``reset``; checked at every step (``"wall_time"``).
        max_tokens: Tokens the policy reported through ``env.charge`` (``"tokens"``).
        max_cost: Cost the policy reported through ``env.charge`` (``"cost"``).
        max_context_chars: Characters of prompt, actions and observations together (``"context"``).
        max_observation_chars: Tool output longer than this is cut with a visible marker.
    """

    max_turns: int = 8
    max_tool_calls: int | None = 64
    max_wall_time_s: float | None = None
    max_tokens: int | None = None
    max_cost: float | None = None
    max_context_chars: int | None = None
    max_observation_chars: int = 16_384

    def __post_init__(self) -> None:
        if self.max_turns < 1:
            raise ConfigError(f"max_turns must be at least 1, got {self.max_turns}")
        for name in ("max_tool_calls", "max_tokens", "max_context_chars", "max_wall_time_s", "max_cost"):
            value = getattr(self, name)
            if value is not None and not value >= 0:  # `not >=` also refuses NaN
                raise ConfigError(f"{name} must be >= 0 or None, got {value}")
        if self.max_observation_chars < 64:
            raise ConfigError("max_observation_chars must be at least 64 to fit the cut marker")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
