"""How a chat-completions request reaches the server: the ``openai`` SDK, or a lean aiohttp path.

Both send the same JSON to ``{base_url}/chat/completions`` and return the response JSON as a
dict. Failures are :class:`TransportError` s that say whether a retry can help (429, 5xx,
timeouts, dropped connections) and are named alike on both paths (``RateLimitError 429``...).

* ``openai``: the official async client; used for OpenAI's own API (its auth, headers and
  quirks are maintained upstream). It costs a few milliseconds of CPU per call.
* ``aiohttp``: a plain HTTP client for self-hosted OpenAI-compatible servers (vLLM, SGLang) at
  high concurrency, where the SDK's per-call CPU becomes the bottleneck (about 5x less here).

``OpenAIPolicy``'s default, ``auto``, picks ``aiohttp`` for any ``base_url`` but OpenAI's API.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

import orjson

from proofgym.core import ProofgymError


class TransportError(ProofgymError):
    """A failed call. ``retryable``: a later try may succeed; ``retry_after``: the server's hint."""

    def __init__(self, description: str, *, retryable: bool, retry_after: float | None = None) -> None:
        super().__init__(description)
        self.description, self.retryable, self.retry_after = description, retryable, retry_after


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


def _retry_after(headers: Any) -> float | None:
    value = headers.get("retry-after") if headers is not None else None
    try:
        return float(value) if value else None
    except ValueError:
        return None  # an HTTP date: the caller keeps its own backoff


def _first_line(text: str) -> str:
    return text.splitlines()[0][:200] if text else ""


class OpenAITransport:
    """The official ``openai`` async client (retries off: the policy retries)."""

    def __init__(self, base_url: str | None, api_key: str, timeout_s: float) -> None:
        import openai

        self._openai = openai
        self._client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key, timeout=timeout_s,
                                          max_retries=0)

    async def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        openai = self._openai
        body = dict(body)
        try:
            raw = await self._client.chat.completions.with_raw_response.create(
                model=body.pop("model"), messages=body.pop("messages"), **body)
        except openai.APIStatusError as exc:
            status = exc.status_code
            raise TransportError(f"{type(exc).__name__} {status}: {_first_line(str(exc))}",
                                 retryable=status == 429 or status >= 500 or status in (408, 409),
                                 retry_after=_retry_after(exc.response.headers)) from exc
        except (openai.APITimeoutError, openai.APIConnectionError) as exc:
            raise TransportError(f"{type(exc).__name__}: {_first_line(str(exc))}", retryable=True) from exc
        # The response JSON as sent: the SDK's pydantic parse is skipped (it costs CPU, and
        # fields it does not model, such as reasoning_content, are what we need).
        return orjson.loads(raw.http_response.content)

    async def aclose(self) -> None:
        await self._client.close()


class AiohttpTransport:
    """A plain aiohttp client speaking the same API."""

    def __init__(self, base_url: str | None, api_key: str, timeout_s: float) -> None:
        import aiohttp

        self._aiohttp = aiohttp
        self._url = (base_url or "https://api.openai.com/v1").rstrip("/") + "/chat/completions"
        self._headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                              timeout=self._timeout)

    async def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        aiohttp = self._aiohttp
        try:
            async with self._session.post(self._url, data=orjson.dumps(body), headers=self._headers) as resp:
                content = await resp.read()
                if resp.status >= 400:
                    try:
                        message = orjson.loads(content)["error"]["message"]
                    except (orjson.JSONDecodeError, KeyError, TypeError):
                        message = content[:200].decode(errors="replace")
                    status = resp.status
                    raise TransportError(f"{_status_name(status)} {status}: {_first_line(str(message))}",
                                         retryable=status == 429 or status >= 500 or status in (408, 409),
                                         retry_after=_retry_after(resp.headers))
        except asyncio.TimeoutError as exc:
            raise TransportError("APITimeoutError: Request timed out.", retryable=True) from exc
        except aiohttp.ClientError as exc:
            raise TransportError(f"APIConnectionError: {_first_line(str(exc))}", retryable=True) from exc
        try:
            return orjson.loads(content)
        except orjson.JSONDecodeError as exc:
            raise TransportError(f"InvalidResponse: not JSON: {content[:120]!r}", retryable=True) from exc

    async def aclose(self) -> None:
        await self._session.close()


TRANSPORTS = {"openai": OpenAITransport, "aiohttp": AiohttpTransport}
