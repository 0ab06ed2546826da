"""Backoff schedules."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Backoff:
    """Delay before retry number ``n`` (0-based): ``base * factor ** n``, at most ``max_delay``."""

    base: float = 0.1
    factor: float = 2.0
    max_delay: float = 30.0

    def __post_init__(self):
        if self.base < 0 or self.factor < 1 or self.max_delay < 0:
            raise ValueError(f"invalid backoff {self}: need base >= 0, factor >= 1, max_delay >= 0")

    def delay(self, n):
        return min(self.max_delay, self.base * self.factor ** n)

    def schedule(self, retries):
        """The delays of the first ``retries`` retries."""
        return [self.delay(n) for n in range(retries)]
