"""Calling a function until it succeeds or the attempts run out."""

import functools
import time

from patience.backoff import Backoff


class RetryError(Exception):
    """Every attempt failed; ``__cause__`` is the last failure."""

    def __init__(self, attempts, last_error):
        super().__init__(f"gave up after {attempts} attempts: {last_error!r}")
        self.attempts = attempts
        self.last_error = last_error


def retry(func, attempts=3, backoff=None, retry_on=(Exception,), sleep=time.sleep):
    """``func()``, called at most ``attempts`` times in total, sleeping between attempts."""
    if attempts < 1:
        raise ValueError(f"attempts must be at least 1, got {attempts}")
    backoff = backoff or Backoff()
    last_error = None
    for attempt in range(attempts):
        try:
            return func()
        except retry_on as exc:
            last_error = exc
            if attempt == attempts:
                break
            sleep(backoff.delay(attempt))
    raise RetryError(attempts, last_error) from last_error


def retrying(attempts=3, backoff=None, retry_on=(Exception,), sleep=time.sleep):
    """Decorator form of ``retry``."""

    def decorate(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            return retry(lambda: func(*args, **kwargs), attempts, backoff, retry_on, sleep)

        return wrapper

    return decorate
