# PROOFGYM-CANARY rate-limiter-window 7f3c9b2e
import pytest

from throttle import ManualClock, RateLimited, SlidingWindowLimiter, rate_limited


def run(limiter, clock, times):
    results = []
    for t in times:
        clock.set(t)
        results.append(limiter.allow())
    return results


def test_rejected_calls_do_not_count():
    clock = ManualClock()
    limiter = SlidingWindowLimiter(1, 5, clock=clock)
    assert run(limiter, clock, [0, 1, 2, 3, 4, 5]) == [True, False, False, False, False, True]


def test_window_slides_rather_than_resets():
    clock = ManualClock()
    limiter = SlidingWindowLimiter(2, 10, clock=clock)
    assert run(limiter, clock, [0, 5, 6, 10, 11, 15]) == [True, True, False, True, False, True]


def test_retry_after_is_honest():
    clock = ManualClock()
    limiter = SlidingWindowLimiter(2, 10, clock=clock)
    run(limiter, clock, [0, 3, 4, 7])
    wait = limiter.retry_after()
    assert wait == pytest.approx(3.0)
    clock.advance(wait)
    assert limiter.allow()


def test_hammering_client_recovers():
    clock = ManualClock()
    limiter = SlidingWindowLimiter(3, 10, clock=clock)
    allowed = run(limiter, clock, range(40))  # one attempt every second
    assert [t for t, ok in enumerate(allowed) if ok] == [0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32]


def test_decorator_after_backoff():
    clock = ManualClock()
    limiter = SlidingWindowLimiter(1, 30, clock=clock)
    calls = []

    @rate_limited(limiter)
    def ping():
        calls.append(clock())

    ping()
    for t in (1, 2, 29):
        clock.set(t)
        with pytest.raises(RateLimited):
            ping()
    clock.set(30)
    ping()
    assert calls == [0, 30]


def test_other_keys_unaffected_by_rejections():
    clock = ManualClock()
    limiter = SlidingWindowLimiter(1, 10, clock=clock)
    assert limiter.allow("a")
    assert not limiter.allow("a")
    assert limiter.allow("b")
