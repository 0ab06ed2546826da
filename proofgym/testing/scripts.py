"""Scripts for the scripted model server: what the "model" answers to a chat history.

A :class:`ChatScript` maps the messages of a ``/v1/chat/completions`` request to the assistant's
next actions. :class:`ReferenceScript` plays each task's reference solution (or a control): it
finds the task from the first user message (the task's prompt) and replays the script over the
history, so generator scripts that react to observations (multi-turn tasks) work statelessly,
one request at a time, as a real model server does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from proofgym.core import ActionScript, AgentAction, Task
from proofgym.core.errors import UnknownPrompt as UnknownPrompt
from proofgym.rollout.policies import ScriptRunner

Message = Mapping[str, Any]


class ChatScript(Protocol):
    """Returns the next assistant actions for a chat history (an empty list: end the turn)."""

    def respond(self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] | None,
                ) -> list[AgentAction]: ...


class ReferenceScript:
    """Answers as each task's reference solution would (or ``solution(task)`` if given).

    Args:
        tasks: The tasks the server can be asked about (a ``TaskSet`` or any iterable).
        solution: Which script to play for a task (default: ``task.reference_solution()``);
            e.g. ``lambda t: t.controls()["known_wrong"]`` serves a negative control.
    """

    def __init__(self, tasks: Iterable[Task],
                 solution: Callable[[Task], ActionScript | None] | None = None) -> None:
        self._by_prompt: dict[str, Task] = {task.get_spec().prompt: task for task in tasks}
        self._solution = solution or (lambda task: task.reference_solution())

    def task_for(self, messages: Sequence[Message]) -> Task:
        first = next((m for m in messages if m.get("role") == "user"), None)
        prompt = _text(first.get("content")) if first else ""
        task = self._by_prompt.get(prompt)
        if task is None:
            raise UnknownPrompt(f"no task has the prompt {prompt[:80]!r}...; the scripted server knows "
                                f"{len(self._by_prompt)} tasks (serve the env's task set)")
        return task

    def respond(self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] | None,
                ) -> list[AgentAction]:
        task = self.task_for(messages)
        script = self._solution(task)
        if script is None:
            raise UnknownPrompt(f"task {task.id!r} has no script to play")
        runner = ScriptRunner(script)
        first_user = next(i for i, m in enumerate(messages) if m.get("role") == "user")
        observation: dict[str, Any] = {"type": "turn_init",
                                       "observation": _text(messages[first_user]["content"])}
        history = list(messages[first_user + 1:])
        # Replay: one scripted action per earlier assistant message, fed what came back after it.
        for i, message in enumerate(history):
            if message.get("role") != "assistant":
                continue
            runner.next(observation)
            reply = history[i + 1] if i + 1 < len(history) else None
            observation = _observation_of(reply)
        action = runner.next(observation)
        return [] if runner.exhausted else [action]


def _observation_of(message: Message | None) -> dict[str, Any]:
    if message is None:
        return {"type": "turn_transition", "observation": ""}
    kind = "tool_output" if message.get("role") == "tool" else "turn_transition"
    return {"type": kind, "observation": _text(message.get("content"))}


def _text(content: Any) -> str:
    """Message content as text (OpenAI allows a list of ``{"type": "text", "text": ...}`` parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
    return str(content)
