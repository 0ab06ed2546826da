"""The set of tools a runtime offers, and the one place tool calls are validated."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import orjson

from proofgym.core.errors import ConfigError
from proofgym.tools.result import ToolResult
from proofgym.tools.tool import Tool, ToolContext


class ToolRegistry:
    """Named tools. The schemas it reports are the ones it validates against (one source)."""

    def __init__(self, tools: Iterable[Tool | Callable[..., Any]] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._schemas_json: bytes | None = None
        for t in tools:
            self.add(t)

    def add(self, t: Tool | Callable[..., Any]) -> Tool:
        t = t if isinstance(t, Tool) else Tool(t)
        if t.name in self._tools:
            raise ConfigError(f"a tool named {t.name!r} is already registered")
        self._tools[t.name] = t
        self._schemas_json = None
        return t

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def __getitem__(self, name: str) -> Tool:
        return self._tools[name]

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def schemas(self) -> list[dict[str, Any]]:
        """OpenAI function-calling schemas, as fresh copies (callers may mutate them)."""
        # A schema is JSON by construction; parsing its cached serialization is a deep copy at a
        # tenth of copy.deepcopy's cost (the env copies the schemas at every reset).
        if self._schemas_json is None:
            self._schemas_json = orjson.dumps([t.schema for t in self._tools.values()])
        return orjson.loads(self._schemas_json)

    def prepare(self, tool_name: Any, tool_input: Any) -> tuple[Tool, dict[str, Any]] | ToolResult:
        """Resolve and validate a call: the tool and its kwargs, or the error result to return."""
        if not isinstance(tool_name, str) or tool_name not in self._tools:
            available = ", ".join(self._tools) or "none"
            return ToolResult.error(
                "unknown_tool", f"unknown tool {tool_name!r}; available tools: {available}"
            )
        t = self._tools[tool_name]
        kwargs = t.validate(tool_input)
        if isinstance(kwargs, ToolResult):
            return kwargs
        return t, kwargs

    def execute(self, tool_name: Any, tool_input: Any,
                context: ToolContext | None = None) -> ToolResult:
        """Validate and run a call in the current thread (runtimes add timeouts and isolation)."""
        prepared = self.prepare(tool_name, tool_input)
        if isinstance(prepared, ToolResult):
            return prepared
        t, kwargs = prepared
        return t.invoke(kwargs, context)
