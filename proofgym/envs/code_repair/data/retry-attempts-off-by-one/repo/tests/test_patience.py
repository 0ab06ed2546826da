import pytest

from patience import Backoff, RetryError, retry, retrying


class Flaky:
    """Fails ``failures`` times, then returns "ok"."""

    def __init__(self, failures, error=ConnectionError):
        self.failures = failures
        self.error = error
        self.calls = 0

    def __call__(self):
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error(f"failure {self.calls}")
        return "ok"


def test_backoff_schedule():
    assert Backoff(base=0.5, factor=2, max_delay=3).schedule(5) == [0.5, 1.0, 2.0, 3, 3]


def test_invalid_backoff():
    with pytest.raises(ValueError):
        Backoff(factor=0.5)


def test_success_first_time_does_not_sleep():
    sleeps = []
    assert retry(Flaky(0), sleep=sleeps.append) == "ok"
    assert sleeps == []


def test_non_retryable_error_propagates():
    func = Flaky(5, error=KeyError)
    with pytest.raises(KeyError):
        retry(func, retry_on=(ConnectionError,), sleep=lambda s: None)
    assert func.calls == 1


def test_decorator_passes_arguments():
    @retrying(attempts=2, sleep=lambda s: None)
    def add(a, b):
        return a + b

    assert add(2, b=3) == 5


def test_attempts_is_the_total_number_of_calls():
    func = Flaky(10)
    with pytest.raises(RetryError):
        retry(func, attempts=3, sleep=lambda s: None)
    assert func.calls == 3
