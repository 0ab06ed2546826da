"""A runtime whose tools are Python callables, for tasks whose world is a Python object."""

from __future__ import annotations

import concurrent.futures as cf
import copy
import logging
from collections.abc import Callable, Iterable
from typing import Any

from proofgym.daemon import DaemonThreads
from proofgym.runtimes.artifact import Artifact
from proofgym.tools import Tool, ToolContext, ToolRegistry, ToolResult, cut_output

log = logging.getLogger(__name__)


class InProcessRuntime:
    """Runs tools in this process, with a per-call timeout and an output limit.

    Python cannot kill a thread, so a call that exceeds ``timeout_s`` is *abandoned*: the agent
    gets a ``timeout`` error at once, the stuck call keeps its (daemon) worker thread, and the
    runtime moves to a fresh worker. A call with a timeout runs on a private copy of the episode
    state that is kept only if it finishes in time, so an abandoned call never changes the episode
    afterwards; and a call that spins forever does not hold up interpreter exit. Tools that may
    hang on untrusted input belong in a ``SandboxRuntime``.

    Args:
        tools: Tools (or plain typed functions) the agent may call.
        timeout_s: Per-call wall-time limit; ``None`` runs calls inline with no limit.
        max_output_chars: Output past this is cut with a visible marker.
        initial_state: Copied into ``ToolContext.state`` at every reset.
    """

    kind = "inprocess"

    def __init__(self, tools: ToolRegistry | Iterable[Tool | Callable[..., Any]] = (), *,
                 timeout_s: float | None = 10.0, max_output_chars: int = 16_384,
                 initial_state: dict[str, Any] | None = None) -> None:
        self.tools = tools if isinstance(tools, ToolRegistry) else ToolRegistry(tools)
        self.timeout_s = timeout_s
        self.max_output_chars = max_output_chars
        self._initial_state = copy.deepcopy(initial_state or {})
        self.context = ToolContext(copy.deepcopy(self._initial_state))
        self._executor: DaemonThreads | None = None
        self._abandoned = 0

    @property
    def cheap(self) -> bool:
        """Every tool is declared cheap (``@tool(cheap=True)``; true with no tools): the
        orchestrator then runs this runtime's ``reset``/``step`` on its event loop instead of
        handing each call to a runtime thread and back."""
        return all(t.cheap for t in self.tools)

    @property
    def state(self) -> dict[str, Any]:
        """The episode's mutable state (what ``Task.setup_runtime`` seeds and tools change)."""
        return self.context.state

    def reset(self) -> None:
        self.context = ToolContext(copy.deepcopy(self._initial_state))

    def execute(self, tool_name: str, tool_input: Any) -> ToolResult:
        prepared = self.tools.prepare(tool_name, tool_input)
        if isinstance(prepared, ToolResult):
            return prepared
        t, kwargs = prepared
        if self.timeout_s is None:
            result = t.invoke(kwargs, self.context)
        else:
            private = ToolContext(copy.deepcopy(self.context.state))  # snapshot() copies it too
            future = self._pool().submit(t.invoke, kwargs, private)
            try:
                result = future.result(timeout=self.timeout_s)
            except cf.TimeoutError:
                self._abandon_worker()
                return ToolResult.error(
                    "timeout", f"{tool_name!r} did not finish within {self.timeout_s:g} s and was "
                    "abandoned; try a smaller input")
            self.context.state.clear()  # finished in time: its changes become the episode's
            self.context.state.update(private.state)
        text, was_cut = cut_output(result.output, self.max_output_chars)
        return ToolResult(text, result.error_kind, was_cut or result.truncated)

    def _pool(self) -> DaemonThreads:
        if self._executor is None:
            self._executor = DaemonThreads("proofgym-tool")
        return self._executor

    def _abandon_worker(self) -> None:
        # The stuck call keeps its thread; the next call gets another (DaemonThreads starts one
        # when none is idle).
        self._abandoned += 1
        log.warning("abandoned a timed-out in-process tool call (%d so far)", self._abandoned)

    def __getstate__(self) -> dict[str, Any]:
        # The worker thread does not travel (pickle, deepcopy, a spawned process); a copy starts
        # its own on its first timed call.
        state = self.__dict__.copy()
        state["_executor"] = None
        return state

    def snapshot(self) -> Artifact:
        return Artifact(self.kind, state=copy.deepcopy(self.context.state))

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown()
            self._executor = None

    def config(self) -> dict[str, Any]:
        return {"kind": self.kind, "timeout_s": self.timeout_s,
                "max_output_chars": self.max_output_chars, "tools": self.tools.schemas()}
