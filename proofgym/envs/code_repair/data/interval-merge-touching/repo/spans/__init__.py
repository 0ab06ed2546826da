"""spans: closed intervals and their unions."""

from spans.interval import Interval
from spans.merge import covered_length, merge

__all__ = ["Interval", "covered_length", "merge"]
