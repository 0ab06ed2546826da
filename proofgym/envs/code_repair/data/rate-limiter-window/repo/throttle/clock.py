"""Clocks: the limiter reads time through a zero-argument callable returning seconds."""


class ManualClock:
    """A clock that only moves when told to; for tests and simulations."""

    def __init__(self, start=0.0):
        self.now = float(start)

    def __call__(self):
        return self.now

    def advance(self, seconds):
        if seconds < 0:
            raise ValueError("a clock cannot go backwards")
        self.now += seconds

    def set(self, when):
        if when < self.now:
            raise ValueError("a clock cannot go backwards")
        self.now = float(when)
