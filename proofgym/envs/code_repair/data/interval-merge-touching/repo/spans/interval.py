"""The closed interval [start, end]."""

from typing import NamedTuple


class Interval(NamedTuple):
    start: float
    end: float

    @classmethod
    def of(cls, start, end):
        """A validated interval; ``start`` must not be after ``end``."""
        if start > end:
            raise ValueError(f"interval start {start} is after its end {end}")
        return cls(start, end)

    @property
    def length(self):
        return self.end - self.start

    def overlaps(self, other):
        """True when the two closed intervals share at least one point."""
        return self.start <= other.end and other.start <= self.end
