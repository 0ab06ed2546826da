"""Applying a limiter to a function."""

import functools


class RateLimited(Exception):
    """The call was not made because the caller is over its rate limit."""

    def __init__(self, key, retry_after):
        super().__init__(f"rate limit exceeded for {key!r}; retry in {retry_after:.2f}s")
        self.key = key
        self.retry_after = retry_after


def rate_limited(limiter, key=lambda *args, **kwargs: "default"):
    """Decorate a function so calls over ``limiter``'s limit raise ``RateLimited``."""

    def decorate(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            k = key(*args, **kwargs)
            if not limiter.allow(k):
                raise RateLimited(k, limiter.retry_after(k))
            return func(*args, **kwargs)

        return wrapper

    return decorate
