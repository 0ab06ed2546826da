"""Working days: weekdays that are not holidays."""

from calkit.ranges import date_range, parse_date


def business_days(start, end, holidays=()):
    """The weekdays from ``start`` to ``end`` (both included) that are not in ``holidays``."""
    closed = {parse_date(h) for h in holidays}
    return [d for d in date_range(start, end) if d.weekday() < 5 and d not in closed]


def count_business_days(start, end, holidays=()):
    """How many business days a request from ``start`` to ``end`` (inclusive) covers."""
    return len(business_days(start, end, holidays))
