"""How a chat-completions request reaches the server: the ``openai`` SDK, or a lean httpx path.

Both send the same JSON to ``{base_url}/chat/completions`` and return the response JSON as a
dict. Failures are :class:`~proofgym.chat_client.TransportError` s that say whether a retry can
help (429, 5xx, timeouts, dropped connections) and are named alike on both paths
(``RateLimitError 429``...); the policy retries them with the one
:class:`~proofgym.chat_client.RetryPolicy` (the LLM judge's too).

* ``openai``: the official async client; used for OpenAI's own API (its auth, headers and
  quirks are maintained upstream). It costs a few milliseconds of CPU per call.
* ``httpx``: a plain HTTP client (the SDK's own HTTP stack, without its request building and
  response parsing) for self-hosted OpenAI-compatible servers (vLLM, SGLang) at high
  concurrency, where the SDK's per-call CPU becomes the bottleneck.

``OpenAIPolicy``'s default, ``auto``, picks ``httpx`` for any ``base_url`` but OpenAI's API.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

import httpx
import orjson

from proofgym.chat_client import (
    TransportError,
    first_line,
    openai_client,
    retry_after,
    retryable_status,
    transport_error,
)
from proofgym.core.tls import tls_context

__all__ = ["TRANSPORTS", "ChatTransport", "HttpxTransport", "OpenAITransport", "TransportError"]


class ChatTransport(Protocol):
    async def chat(self, body: dict[str, Any]) -> dict[str, Any]: ...

    async def aclose(self) -> None: ...


def _status_name(status: int) -> str:
    if status == 429:
        return "RateLimitError"
    if status >= 500:
        return "InternalServerError"
    return {400: "BadRequestError", 401: "AuthenticationError", 403: "PermissionDeniedError",
            404: "NotFoundError", 422: "UnprocessableEntityError"}.get(status, "APIStatusError")


class OpenAITransport:
    """The official ``openai`` async client (its retries off: the policy retries)."""

    def __init__(self, base_url: str | None, api_key: str, timeout_s: float) -> None:
        self._client = openai_client(base_url, api_key, timeout_s)

    async def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        body = dict(body)
        if "return_token_ids" in body:  # vLLM's, not the SDK's: sent as an extra body field
            extra = {**body.get("extra_body", {}), "return_token_ids": body.pop("return_token_ids")}
            body["extra_body"] = extra
        try:
            raw = await self._client.chat.completions.with_raw_response.create(
                model=body.pop("model"), messages=body.pop("messages"), **body)
        except Exception as exc:  # the SDK's errors become TransportErrors; anything else is a bug
            failure = transport_error(exc)
            if failure is None:
                raise
            raise failure from exc
        # The response JSON as sent: the SDK's pydantic parse is skipped (it costs CPU, and
        # fields it does not model, such as reasoning_content, are what we need).
        return orjson.loads(raw.http_response.content)

    async def aclose(self) -> None:
        await self._client.close()


class HttpxTransport:
    """A plain httpx client speaking the same API; ``timeout_s`` bounds each call as a whole."""

    def __init__(self, base_url: str | None, api_key: str, timeout_s: float) -> None:
        self._url = (base_url or "https://api.openai.com/v1").rstrip("/") + "/chat/completions"
        self._headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}
        self._timeout_s = timeout_s
        # no pool limit: the run's concurrency is the limit, as for the SDK's own client
        self._client = httpx.AsyncClient(timeout=timeout_s, verify=tls_context(), limits=httpx.Limits(
            max_connections=None, max_keepalive_connections=None))

    async def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        try:
            async with asyncio.timeout(self._timeout_s):
                resp = await self._client.post(self._url, content=orjson.dumps(body), headers=self._headers)
        except (TimeoutError, httpx.TimeoutException) as exc:
            raise TransportError("APITimeoutError: Request timed out.", retryable=True, timeout=True) from exc
        except httpx.HTTPError as exc:
            raise TransportError(f"APIConnectionError: {first_line(str(exc) or type(exc).__name__)}",
                                 retryable=True) from exc
        content = resp.content
        if resp.status_code >= 400:
            try:
                message = orjson.loads(content)["error"]["message"]
            except (orjson.JSONDecodeError, KeyError, TypeError):
                message = content[:200].decode(errors="replace")
            status = resp.status_code
            raise TransportError(f"{_status_name(status)} {status}: {first_line(str(message))}",
                                 retryable=retryable_status(status), retry_after=retry_after(resp.headers))
        try:
            return orjson.loads(content)
        except orjson.JSONDecodeError as exc:
            raise TransportError(f"InvalidResponse: not JSON: {content[:120]!r}", retryable=True) from exc

    async def aclose(self) -> None:
        await self._client.aclose()


TRANSPORTS = {"openai": OpenAITransport, "httpx": HttpxTransport}
