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
import hashlib
import os
import re
import time
from collections import deque
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import orjson
from gymnasium import spaces

from proofgym.chat_client import RetriesExhausted, RetryPolicy, TransportError
from proofgym.core import AgentAction, ConfigError, Task, ToolCallAction, TurnCompleteAction
from proofgym.core.defaults import DEFAULTS
from proofgym.core.errors import PolicyInfrastructureError as PolicyInfrastructureError
from proofgym.rollout.async_policy import PolicyStep
from proofgym.rollout.chat_transport import TRANSPORTS, ChatTransport

_TEXT_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_NAME_IN_TEXT = re.compile(r'"name"\s*:\s*"([^"]+)"')


def resolve_transport(transport: str, base_url: str | None) -> str:
    """``auto``: the lean client for a self-hosted server (the SDK's per-call CPU is what caps a
    high-concurrency run), the SDK for OpenAI's own API (its auth and quirks kept upstream)."""
    if transport != "auto":
        return transport
    host = urlsplit(base_url).hostname if base_url else None
    return "openai" if host is None or host == "openai.com" or host.endswith(".openai.com") else "httpx"


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
        record_tokens: Ask the server for token ids and log-probabilities (vLLM's
            ``return_token_ids`` and ``logprobs``) and record them per model call (see
            :func:`call_tokens`). Whatever this says, tokens a server returns are recorded.
        transport: ``openai`` (the official SDK client), ``httpx`` (lean, for self-hosted
            servers at high concurrency) or ``auto`` (the default: ``httpx`` for a
            ``base_url`` other than OpenAI's own API, else ``openai``); see
            :mod:`proofgym.rollout.chat_transport`. ``describe()`` records the one used.
    """

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 system_prompt: str | None = None, sampling: Mapping[str, Any] | None = None,
                 version: str = DEFAULTS.policy_version, max_retries: int = DEFAULTS.client_max_retries,
                 backoff_s: float = DEFAULTS.client_backoff_s,
                 max_backoff_s: float = DEFAULTS.client_max_backoff_s,
                 timeout_s: float = DEFAULTS.client_timeout_s,
                 parse_text_tool_calls: bool = True, transport: str = "auto",
                 record_tokens: bool = False) -> None:
        if max_retries < 0 or backoff_s < 0 or timeout_s <= 0:
            raise ConfigError("max_retries and backoff_s must be >= 0 and timeout_s > 0")
        self.retry = RetryPolicy(max_retries, backoff_s, max_backoff_s)
        if transport not in (*TRANSPORTS, "auto"):
            raise ConfigError(f"unknown transport {transport!r}; use one of "
                              f"{', '.join((*TRANSPORTS, 'auto'))}")
        self.transport_name = resolve_transport(transport, base_url)
        self.model, self.base_url, self.api_key = model, base_url, api_key
        self.system_prompt = system_prompt
        self.sampling = dict(sampling or {})
        self.version = version
        self.max_retries, self.backoff_s, self.max_backoff_s = max_retries, backoff_s, max_backoff_s
        self.timeout_s = timeout_s
        self.parse_text_tool_calls = parse_text_tool_calls
        self.record_tokens = record_tokens
        self._transport: ChatTransport | None = None
        self._transport_loop: asyncio.AbstractEventLoop | None = None

    def describe(self) -> dict[str, Any]:
        system = (hashlib.sha256(self.system_prompt.encode()).hexdigest()[:16]
                  if self.system_prompt is not None else None)
        described = {"name": "openai", "model": self.model, "version": self.version,
                     "base_url": self.base_url, "transport": self.transport_name,
                     "sampling": dict(self.sampling), "system_prompt_sha": system}
        if self.record_tokens:  # only when on: runs without it keep their contract ids
            described["record_tokens"] = True
        return described

    async def start_episode(self, task: Task, observation: Mapping[str, Any], info: Mapping[str, Any],
                            action_space: spaces.Space) -> OpenAISession:
        return OpenAISession(self, info.get("tools") or None)

    def transport(self) -> ChatTransport:
        """The transport of the running event loop (an HTTP client is bound to its loop)."""
        loop = asyncio.get_running_loop()
        if self._transport is None or self._transport_loop is not loop:
            self._transport = TRANSPORTS[self.transport_name](self.base_url, self.api_key or _env_key(),
                                                              self.timeout_s)
            self._transport_loop = loop
        return self._transport

    async def aclose(self) -> None:
        if self._transport is not None:
            await self._transport.aclose()
            self._transport = None

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                       ) -> tuple[dict[str, Any], dict[str, Any]]:
        """One chat completion with retries: the response JSON and its usage record."""
        body: dict[str, Any] = {**self.sampling, "model": self.model, "messages": messages}
        if self.record_tokens:
            body.update(logprobs=True, return_token_ids=True)
        if tools:
            body["tools"] = tools
        transport = self.transport()

        async def once() -> tuple[dict[str, Any], float]:
            started = time.perf_counter()
            return await transport.chat(body), time.perf_counter() - started

        try:
            (response, latency), attempt, failures = await self.retry.acall(once)
        except RetriesExhausted as exc:
            raise PolicyInfrastructureError(
                f"model server failed {len(exc.failures)} times (retried {self.max_retries}x with "
                f"backoff); last: {exc.failures[-1]}") from exc
        except TransportError as exc:  # not retryable: a 4xx other than 429
            raise PolicyInfrastructureError(
                f"model server rejected the request ({exc.description}); not retried") from exc
        choices = response.get("choices") or []
        if not choices or not isinstance(choices[0].get("message"), dict):
            raise PolicyInfrastructureError(f"model server returned no message: {str(response)[:200]}")
        usage = response.get("usage") or {}
        record = {
            "prompt_tokens": usage.get("prompt_tokens"),
            "completion_tokens": usage.get("completion_tokens"),
            "total_tokens": usage.get("total_tokens"),
            "latency_s": latency, "finish_reason": choices[0].get("finish_reason"),
            "retries": attempt,
        }
        if failures:
            record["failures"] = failures
        tokens = call_tokens(response)
        if tokens is not None:
            record["tokens"] = tokens
        return response, record


def call_tokens(response: Mapping[str, Any]) -> dict[str, Any] | None:
    """One model call's tokens as the server returned them (vLLM's ``prompt_token_ids``, the
    first choice's ``token_ids`` and ``logprobs.content``), or ``None`` when it returned none.

    ``loss_mask`` covers ``prompt_ids + completion_ids``: 1 for each token the policy generated
    (the completion), 0 for the prompt. The ids are kept as sent, never re-tokenised.
    """
    choice = (response.get("choices") or [{}])[0]
    prompt, completion = response.get("prompt_token_ids"), choice.get("token_ids")
    content = (choice.get("logprobs") or {}).get("content")
    if prompt is None and completion is None and content is None:
        return None
    values = [float(entry["logprob"]) for entry in content] if content else None
    out: dict[str, Any] = {"prompt_ids": list(prompt) if prompt is not None else None,
                           "completion_ids": list(completion) if completion is not None else None,
                           "logprobs": values}
    if prompt is not None and completion is not None:
        out["loss_mask"] = [0] * len(prompt) + [1] * len(completion)
    return out


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
        actions, message = parse_reply(response["choices"][0]["message"], len(self.messages),
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


def parse_reply(message: Mapping[str, Any], position: int, *, text_tool_calls: bool = True,
                ) -> tuple[list[AgentAction], dict[str, Any]]:
    """The actions in an assistant ``message`` (response JSON) and the message to keep in history.

    Native ``tool_calls`` first; else ``<tool_call>`` blocks in the text; else the text ends the
    turn. Reasoning (``reasoning_content`` / ``reasoning``) stays in the history message.
    """
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    content = message.get("content") or ""
    if not isinstance(content, str):  # a list of parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
    calls: list[tuple[str, str, Any, str]] = []  # id, name, input for the env, arguments text
    for i, tc in enumerate(message.get("tool_calls") or []):
        function = tc.get("function") or {}
        arguments = function.get("arguments")
        arguments = arguments if isinstance(arguments, str) else orjson.dumps(arguments or {}).decode()
        calls.append((tc.get("id") or f"call_{position}_{i}", str(function.get("name") or ""),
                      arguments, arguments))
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


def _env_key() -> str:
    return os.environ.get("OPENAI_API_KEY") or "EMPTY"
