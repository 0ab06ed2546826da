"""What a tool call gives back to the agent."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from proofgym.core.errors import ToolError as ToolError
from proofgym.core.errors import ToolErrorKind

CUT_MARKER = "\n[... {n} characters cut by proofgym: output exceeded {limit} characters ...]\n"


@dataclass(frozen=True)
class ToolResult:
    """The outcome of one tool call.

    Invariant: ``error_kind is None`` exactly when ``ok``; then ``output`` is the tool's output,
    otherwise a message for the agent saying what was wrong and what to do.
    """

    output: str
    error_kind: ToolErrorKind | None = None
    truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.error_kind is None

    @classmethod
    def error(cls, kind: ToolErrorKind | str, message: str) -> ToolResult:
        return cls(message, ToolErrorKind(kind))

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["error_kind"] = self.error_kind.value if self.error_kind else None
        return data


def cut_output(text: str, limit: int) -> tuple[str, bool]:
    """Cut ``text`` to at most ``limit`` characters, keeping its head and tail around a visible
    marker (errors are usually at the end, context at the start). Returns ``(text, was_cut)``."""
    if len(text) <= limit:
        return text, False
    marker = CUT_MARKER.format(n=len(text) - limit, limit=limit)
    keep = max(limit - len(marker), 0)
    head = keep // 2
    tail = keep - head
    cut = len(text) - head - tail
    marker = CUT_MARKER.format(n=cut, limit=limit)
    return text[:head] + marker + (text[len(text) - tail:] if tail else ""), True
