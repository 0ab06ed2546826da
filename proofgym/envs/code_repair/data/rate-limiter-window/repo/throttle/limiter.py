"""A sliding-window rate limiter."""

import time
from collections import deque


class SlidingWindowLimiter:
    """At most ``limit`` allowed calls per key in any ``window`` seconds.

    A call at time ``now`` is allowed when fewer than ``limit`` allowed calls of the same key
    happened in ``(now - window, now]``. Rejected calls are not recorded.
    """

    def __init__(self, limit, window, clock=time.monotonic):
        if limit < 1 or window <= 0:
            raise ValueError(f"need limit >= 1 and window > 0, got limit={limit}, window={window}")
        self.limit = limit
        self.window = window
        self._clock = clock
        self._calls = {}

    def _recent(self, key, now):
        calls = self._calls.setdefault(key, deque())
        while calls and calls[0] <= now - self.window:
            calls.popleft()
        return calls

    def allow(self, key="default"):
        """True (and the call is recorded) when ``key`` may make a call now."""
        now = self._clock()
        calls = self._recent(key, now)
        allowed = len(calls) < self.limit
        calls.append(now)
        return allowed

    def retry_after(self, key="default"):
        """Seconds until ``key`` may call again (0.0 when it may call now)."""
        now = self._clock()
        calls = self._recent(key, now)
        if len(calls) < self.limit:
            return 0.0
        return calls[0] + self.window - now
