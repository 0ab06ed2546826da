"""The one client to an OpenAI-compatible chat server, and the one retry policy, for the policy
(:mod:`proofgym.rollout.openai_policy`) and the LLM judge (:mod:`proofgym.verify.graders.judge`).

* :func:`openai_client` builds the ``openai`` SDK client (sync for the judge, async for the
  policy) with the SDK's own retries off: retrying is :class:`RetryPolicy`'s job, so both callers
  retry alike.
* :class:`TransportError` is a failed call that says whether a retry can help (429, 5xx, 408,
  409, timeouts, dropped connections); :func:`transport_error` turns the SDK's errors into one.
* :class:`RetryPolicy`: at most ``max_retries`` retries, exponential backoff with jitter from
  ``backoff_s`` up to ``max_backoff_s``, a server's ``Retry-After`` honoured up to that cap.
  A call that is not retryable fails at once; when retries run out, :class:`RetriesExhausted`
  carries every failure.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from proofgym.core import ConfigError
from proofgym.core.defaults import DEFAULTS
from proofgym.core.errors import RetriesExhausted as RetriesExhausted
from proofgym.core.errors import TransportError as TransportError

T = TypeVar("T")


def retryable_status(status: int) -> bool:
    return status == 429 or status >= 500 or status in (408, 409)


def retry_after(headers: Any) -> float | None:
    """A ``Retry-After`` header in seconds (``None``: absent, or an HTTP date)."""
    value = headers.get("retry-after") if headers is not None else None
    try:
        return float(value) if value else None
    except ValueError:
        return None  # an HTTP date: the caller keeps its own backoff


def first_line(text: str) -> str:
    return text.splitlines()[0][:200] if text else ""


def openai_client(base_url: str | None, api_key: str, timeout_s: float, *, sync: bool = False) -> Any:
    """The ``openai`` SDK client (``OpenAI`` or ``AsyncOpenAI``), its own retries off."""
    import openai

    cls = openai.OpenAI if sync else openai.AsyncOpenAI
    return cls(base_url=base_url, api_key=api_key, timeout=timeout_s, max_retries=0)


def transport_error(exc: BaseException) -> TransportError | None:
    """The SDK's error ``exc`` as a :class:`TransportError` (``None``: not a transport failure)."""
    import openai

    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        return TransportError(f"{type(exc).__name__} {status}: {first_line(str(exc))}",
                              retryable=retryable_status(status),
                              retry_after=retry_after(exc.response.headers))
    if isinstance(exc, openai.APITimeoutError):
        return TransportError(f"{type(exc).__name__}: {first_line(str(exc))}", retryable=True, timeout=True)
    if isinstance(exc, openai.APIConnectionError):
        return TransportError(f"{type(exc).__name__}: {first_line(str(exc))}", retryable=True)
    return None


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries with exponential backoff and jitter (see the module docstring)."""

    max_retries: int = DEFAULTS.client_max_retries
    backoff_s: float = DEFAULTS.client_backoff_s
    max_backoff_s: float = DEFAULTS.client_max_backoff_s

    def __post_init__(self) -> None:
        if self.max_retries < 0 or self.backoff_s < 0 or self.max_backoff_s < 0:
            raise ConfigError(f"max_retries, backoff_s and max_backoff_s must be >= 0 (got "
                              f"{self.max_retries}, {self.backoff_s:g}, {self.max_backoff_s:g})")

    @property
    def tries(self) -> int:
        return self.max_retries + 1

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after failed try ``attempt`` (0-based)."""
        delay = min(self.max_backoff_s, self.backoff_s * 2 ** attempt)
        if retry_after:
            delay = max(delay, min(retry_after, self.max_backoff_s))
        return delay * (0.5 + random.random() / 2)

    def call(self, fn: Callable[[], T]) -> tuple[T, int, list[str]]:
        """``fn()`` until it returns: (its result, retries used, descriptions of the failed tries).
        ``fn`` raises :class:`TransportError` on failure; one that is not retryable is re-raised,
        and :class:`RetriesExhausted` when every try failed."""
        failures: list[str] = []
        attempt = 0
        while True:  # _failed raises on the last try
            try:
                return fn(), attempt, failures
            except TransportError as exc:
                self._failed(exc, attempt, failures)
                time.sleep(self.delay(attempt, exc.retry_after))
            attempt += 1

    async def acall(self, fn: Callable[[], Awaitable[T]]) -> tuple[T, int, list[str]]:
        """:meth:`call` for a coroutine function; the backoff sleeps without blocking the loop."""
        failures: list[str] = []
        attempt = 0
        while True:  # _failed raises on the last try
            try:
                return await fn(), attempt, failures
            except TransportError as exc:
                self._failed(exc, attempt, failures)
                await asyncio.sleep(self.delay(attempt, exc.retry_after))
            attempt += 1

    def _failed(self, exc: TransportError, attempt: int, failures: list[str]) -> None:
        if not exc.retryable:  # a 4xx other than 429: retrying cannot help
            raise exc
        failures.append(exc.description)
        if attempt == self.max_retries:
            raise RetriesExhausted(failures, exc) from exc
