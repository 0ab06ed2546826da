"""Unions of closed intervals."""

from spans.interval import Interval


def merge(intervals):
    """The sorted, disjoint intervals covering exactly the points of ``intervals``.

    Intervals are closed, so two intervals that share an end point are merged into one.
    """
    ordered = sorted(Interval.of(*iv) for iv in intervals)
    merged = []
    for iv in ordered:
        if merged and iv.start <= merged[-1].end:
            last = merged[-1]
            merged[-1] = Interval(last.start, max(last.end, iv.end))
        else:
            merged.append(iv)
    return merged


def covered_length(intervals):
    """Total length of the union of ``intervals``."""
    return sum(iv.length for iv in merge(intervals))
