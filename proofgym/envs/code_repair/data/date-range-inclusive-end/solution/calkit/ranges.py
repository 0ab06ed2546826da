"""Inclusive ranges of dates."""

from datetime import date, timedelta


def parse_date(value):
    """A ``date`` from an ISO ``YYYY-MM-DD`` string (dates pass through unchanged)."""
    if isinstance(value, date):
        return value
    try:
        return date.fromisoformat(value)
    except (TypeError, ValueError):
        raise ValueError(f"expected a date as YYYY-MM-DD, got {value!r}") from None


def date_range(start, end, step_days=1):
    """The dates from ``start`` to ``end``, both included, every ``step_days`` days.

    ``end`` is included only when the steps land on it. An empty list when ``start`` is after ``end``.
    """
    if step_days < 1:
        raise ValueError(f"step_days must be a positive number of days, got {step_days}")
    start, end = parse_date(start), parse_date(end)
    step = timedelta(days=step_days)
    dates = []
    current = start
    while current <= end:
        dates.append(current)
        current += step
    return dates
