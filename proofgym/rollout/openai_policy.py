"""``OpenAIPolicy``: a model behind any OpenAI-compatible server (vLLM, SGLang, OpenAI).

Observations become chat messages: the task prompt (``turn_init``) and each turn transition are
``user`` messages; tool outputs and tool errors are ``tool`` messages answering the call's id.
The env's tool schemas go out as ``tools``. The reply becomes actions: native ``tool_calls`` (and
``<tool_call>{...}</tool_call>`` blocks a server left in the text) are :class:`ToolCallAction` s,
run as consecutive env steps when there are several; a reply without a tool call ends the turn
(:class:`TurnCompleteAction`). Arguments are passed through as the server sent them, so malformed
JSON reaches the env and comes back as an error observation the model sees.

Transient server failures (429, 5xx, timeouts, dropped connections) are retried with exponential
backoff and jitter. When retries run out the episode fails with :class:`PolicyInfrastructureError`:
the orchestrator records it as ``status="error"`` with an unscored verdict, never as reward 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import random
import re
import time
from collections import deque
from collections.abc import Mapping
from typing import Any

import openai
import orjson
from gymnasium import spaces

from proofgym.core import AgentAction, Task, ToolCallAction, TurnCompleteAction
from proofgym.rollout.async_policy import PolicyStep

_TEXT_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_NAME_IN_TEXT = re.compile(r'"name"\s*:\s*"([^"]+)"')
_RETRYABLE = (openai.RateLimitError, openai.InternalServerError, openai.APITimeoutError,
              openai.APIConnectionError)


class PolicyInfrastructureError(RuntimeError):
    """The model server could not answer (after every retry): an infrastructure failure, not a
    wrong answer. Episodes failing with it are errors, never scored."""


class OpenAIPolicy:
    """Plays episodes with a chat model over the OpenAI API.

    Args:
        model: Model id on the server.
        base_url: The server's ``/v1`` URL (default: the ``openai`` client's, i.e. OpenAI or
            ``OPENAI_BASE_URL``).
        api_key: Key (default ``OPENAI_API_KEY``, or ``"EMPTY"`` for local servers).
        system_prompt: Optional first message.
        sampling: Extra ``chat.completions.create`` arguments (``temperature``, ``max_tokens``...).
        version: The policy's version (checkpoint, training step), recorded on each trajectory.
        max_retries: Retries of a failed call (so ``max_retries + 1`` tries at most).
        backoff_s: First retry delay; doubles per retry up to ``max_backoff_s``, with jitter.
        timeout_s: Per-call timeout.
        parse_text_tool_calls: Also read ``<tool_call>{...}</tool_call>`` from the content.
    """

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 system_prompt: str | None = None, sampling: Mapping[str, Any] | None = None,
                 version: str = "0", max_retries: int = 4, backoff_s: float = 0.25,
                 max_backoff_s: float = 8.0, timeout_s: float = 120.0,
                 parse_text_tool_calls: bool = True) -> None:
        if max_retries < 0 or backoff_s < 0 or timeout_s <= 0:
            raise ValueError("max_retries and backoff_s must be >= 0 and timeout_s > 0")
        self.model, self.base_url, self.api_key = model, base_url, api_key
        self.system_prompt = system_prompt
        self.sampling = dict(sampling or {})
        self.version = version
        self.max_retries, self.backoff_s, self.max_backoff_s = max_retries, backoff_s, max_backoff_s
        self.timeout_s = timeout_s
        self.parse_text_tool_calls = parse_text_tool_calls
        self._client: openai.AsyncOpenAI | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    def describe(self) -> dict[str, Any]:
        system = (hashlib.sha256(self.system_prompt.encode()).hexdigest()[:16]
                  if self.system_prompt is not None else None)
        return {"name": "openai", "model": self.model, "version": self.version,
                "base_url": self.base_url, "sampling": dict(self.sampling), "system_prompt_sha": system}

    async def start_episode(self, task: Task, observation: Mapping[str, Any], info: Mapping[str, Any],
                            action_space: spaces.Space) -> OpenAISession:
        return OpenAISession(self, info.get("tools") or None)

    @property
    def client(self) -> openai.AsyncOpenAI:
        """The async client of the running event loop (a client is bound to the loop it ran on)."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            self._client = openai.AsyncOpenAI(base_url=self.base_url, api_key=self.api_key or _env_key(),
                                              timeout=self.timeout_s, max_retries=0)
            self._client_loop = loop
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                       ) -> tuple[Any, dict[str, Any]]:
        """One chat completion with retries: the response and its usage record."""
        failures: list[str] = []
        for attempt in range(self.max_retries + 1):
            started = time.perf_counter()
            try:
                kwargs: dict[str, Any] = dict(self.sampling)
                if tools:
                    kwargs["tools"] = tools
                response = await self.client.chat.completions.create(
                    model=self.model, messages=messages, **kwargs)  # type: ignore[arg-type]
            except _RETRYABLE as exc:
                failures.append(_describe_failure(exc))
                if attempt == self.max_retries:
                    break
                await asyncio.sleep(self._delay(attempt, exc))
                continue
            except openai.APIStatusError as exc:  # 4xx other than 429: retrying cannot help
                raise PolicyInfrastructureError(
                    f"model server rejected the request ({_describe_failure(exc)}); not retried") from exc
            latency = time.perf_counter() - started
            if not response.choices:
                raise PolicyInfrastructureError("model server returned no choices")
            usage = response.usage
            record = {
                "prompt_tokens": usage.prompt_tokens if usage else None,
                "completion_tokens": usage.completion_tokens if usage else None,
                "total_tokens": usage.total_tokens if usage else None,
                "latency_s": latency, "finish_reason": response.choices[0].finish_reason,
                "retries": attempt,
            }
            if failures:
                record["failures"] = failures
            return response, record
        raise PolicyInfrastructureError(
            f"model server failed {len(failures)} times (retried {self.max_retries}x with backoff); "
            f"last: {failures[-1]}")

    def _delay(self, attempt: int, exc: Exception) -> float:
        delay = min(self.max_backoff_s, self.backoff_s * 2 ** attempt)
        retry_after = getattr(getattr(exc, "response", None), "headers", {}).get("retry-after")
        if retry_after:
            with contextlib.suppress(ValueError):  # an HTTP date: keep our own backoff
                delay = max(delay, min(float(retry_after), self.max_backoff_s))
        return delay * (0.5 + random.random() / 2)


class OpenAISession:
    """One episode's conversation. Invariant: ``messages`` is a valid chat history: every
    ``tool`` message answers a ``tool_calls`` entry of the assistant message before it."""

    def __init__(self, policy: OpenAIPolicy, tools: list[dict[str, Any]] | None) -> None:
        self.policy = policy
        self.tools = tools
        self.messages: list[dict[str, Any]] = []
        if policy.system_prompt is not None:
            self.messages.append({"role": "system", "content": policy.system_prompt})
        self._pending: deque[ToolCallAction] = deque()
        self._last_call_id: str | None = None

    async def act(self, observation: Mapping[str, Any]) -> PolicyStep:
        self._absorb(observation)
        if self._pending:  # the rest of a multi-call reply: no new model call
            return self._emit(self._pending.popleft(), {"from_previous_call": True})
        response, usage = await self.policy.complete(self.messages, self.tools)
        actions, message = parse_reply(response.choices[0].message, len(self.messages),
                                       text_tool_calls=self.policy.parse_text_tool_calls)
        self.messages.append(message)
        usage["tool_calls"] = sum(isinstance(a, ToolCallAction) for a in actions)
        first, *rest = actions
        self._pending.extend(a for a in rest if isinstance(a, ToolCallAction))
        return self._emit(first, usage)

    def _emit(self, action: AgentAction, usage: dict[str, Any]) -> PolicyStep:
        if isinstance(action, ToolCallAction):
            self._last_call_id = action.call_id
        return PolicyStep(action, usage)

    def _absorb(self, observation: Mapping[str, Any]) -> None:
        kind = observation.get("type")
        text = str(observation.get("observation", ""))
        if kind in ("tool_output", "tool_error"):
            self.messages.append({"role": "tool", "tool_call_id": self._last_call_id or "call_0",
                                  "content": text})
        elif kind in ("turn_init", "turn_transition"):
            self.messages.append({"role": "user", "content": text})

    async def aclose(self) -> None:
        return None


def parse_reply(message: Any, position: int, *, text_tool_calls: bool = True,
                ) -> tuple[list[AgentAction], dict[str, Any]]:
    """The actions in an assistant ``message`` and the message to keep in the history.

    Native ``tool_calls`` first; else ``<tool_call>`` blocks in the text; else the text ends the
    turn. Reasoning (``reasoning_content`` / ``reasoning``) stays in the history message.
    """
    extra = getattr(message, "model_extra", None) or {}
    reasoning = extra.get("reasoning_content") or extra.get("reasoning")
    content = message.content or ""
    calls: list[tuple[str, str, Any, str]] = []  # id, name, input for the env, arguments text
    for tc in message.tool_calls or []:
        function = getattr(tc, "function", None)
        name = function.name if function is not None else ""
        arguments = function.arguments if function is not None else ""
        calls.append((tc.id, name, arguments, arguments))
    if not calls and text_tool_calls and "<tool_call>" in content:
        for i, body in enumerate(_TEXT_TOOL_CALL.findall(content)):
            name, tool_input = _parse_text_call(body)
            arguments = tool_input if isinstance(tool_input, str) else orjson.dumps(tool_input).decode()
            calls.append((f"call_{position}_{i}", name, tool_input, arguments))
        content = _TEXT_TOOL_CALL.sub("", content).strip()
    kept: dict[str, Any] = {"role": "assistant", "content": content or None}
    if reasoning:
        kept["reasoning_content"] = reasoning
    if not calls:
        kept["content"] = content
        return [TurnCompleteAction(content)], kept
    kept["tool_calls"] = [{"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
                          for cid, name, _, args in calls]
    return [ToolCallAction(name, tool_input, cid) for cid, name, tool_input, _ in calls], kept


def _parse_text_call(body: str) -> tuple[str, Any]:
    """``{"name": ..., "arguments": {...}}`` from a text tool call; unparseable bodies keep the
    raw text as arguments so the env answers with an error the model can read."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        found = _NAME_IN_TEXT.search(body)
        return (found.group(1) if found else ""), body
    if not isinstance(data, dict):
        return "", body
    arguments = data.get("arguments", data.get("parameters", {}))
    return str(data.get("name", "")), arguments


def _describe_failure(exc: Exception) -> str:
    status = getattr(exc, "status_code", None)
    text = str(exc).splitlines()[0][:200] if str(exc) else ""
    return f"{type(exc).__name__}{f' {status}' if status else ''}: {text}"


def _env_key() -> str:
    return os.environ.get("OPENAI_API_KEY") or "EMPTY"
