# PROOFGYM-CANARY retry-attempts-off-by-one 7f3c9b2e
import pytest

from patience import Backoff, RetryError, retry, retrying


def always_fails(counter):
    def func():
        counter.append(1)
        raise TimeoutError(f"attempt {len(counter)}")

    return func


def test_sleeps_only_between_attempts():
    calls, sleeps = [], []
    with pytest.raises(RetryError):
        retry(always_fails(calls), attempts=3, backoff=Backoff(base=0.1), sleep=sleeps.append)
    assert len(calls) == 3
    assert sleeps == pytest.approx([0.1, 0.2])


def test_single_attempt_never_sleeps():
    calls, sleeps = [], []
    with pytest.raises(RetryError):
        retry(always_fails(calls), attempts=1, sleep=sleeps.append)
    assert (len(calls), sleeps) == (1, [])


def test_retry_error_carries_last_failure():
    calls = []
    with pytest.raises(RetryError) as info:
        retry(always_fails(calls), attempts=4, sleep=lambda s: None)
    assert info.value.attempts == 4
    assert str(info.value.__cause__) == "attempt 4"


def test_success_on_last_attempt():
    state = {"n": 0}
    sleeps = []

    def func():
        state["n"] += 1
        if state["n"] < 3:
            raise ConnectionError
        return state["n"]

    assert retry(func, attempts=3, sleep=sleeps.append) == 3
    assert len(sleeps) == 2


def test_decorator_respects_attempts():
    calls, sleeps = [], []

    @retrying(attempts=5, backoff=Backoff(base=1, max_delay=4), sleep=sleeps.append)
    def job():
        always_fails(calls)()

    with pytest.raises(RetryError):
        job()
    assert len(calls) == 5
    assert sleeps == [1, 2, 4, 4]


def test_attempts_must_be_positive():
    with pytest.raises(ValueError):
        retry(lambda: None, attempts=0)
