"""throttle: sliding-window rate limiting."""

from throttle.clock import ManualClock
from throttle.decorators import RateLimited, rate_limited
from throttle.limiter import SlidingWindowLimiter

__all__ = ["ManualClock", "RateLimited", "SlidingWindowLimiter", "rate_limited"]
