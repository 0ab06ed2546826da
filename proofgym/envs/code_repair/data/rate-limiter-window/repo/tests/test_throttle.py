import pytest

from throttle import ManualClock, RateLimited, SlidingWindowLimiter, rate_limited


def test_allows_up_to_limit():
    limiter = SlidingWindowLimiter(3, 1.0, clock=ManualClock())
    assert [limiter.allow() for _ in range(4)] == [True, True, True, False]


def test_keys_are_independent():
    limiter = SlidingWindowLimiter(1, 10, clock=ManualClock())
    assert limiter.allow("alice") and limiter.allow("bob")
    assert not limiter.allow("alice")


def test_window_expires():
    clock = ManualClock()
    limiter = SlidingWindowLimiter(1, 10, clock=clock)
    assert limiter.allow()
    clock.advance(10)
    assert limiter.allow()


def test_invalid_configuration():
    with pytest.raises(ValueError):
        SlidingWindowLimiter(0, 1)


def test_decorator_raises():
    limiter = SlidingWindowLimiter(1, 60, clock=ManualClock())

    @rate_limited(limiter, key=lambda user: user)
    def fetch(user):
        return f"data for {user}"

    assert fetch("ann") == "data for ann"
    with pytest.raises(RateLimited) as info:
        fetch("ann")
    assert info.value.retry_after == 60


def test_client_that_retries_gets_through():
    clock = ManualClock()
    limiter = SlidingWindowLimiter(2, 10, clock=clock)
    assert limiter.allow() and limiter.allow()  # t = 0
    clock.set(2)
    assert not limiter.allow()
    clock.set(5)
    assert not limiter.allow()
    clock.set(10.5)
    assert limiter.allow()
