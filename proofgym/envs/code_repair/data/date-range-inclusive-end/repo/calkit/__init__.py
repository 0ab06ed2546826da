"""calkit: date ranges and business days."""

from calkit.business import business_days, count_business_days
from calkit.ranges import date_range, parse_date

__all__ = ["business_days", "count_business_days", "date_range", "parse_date"]
