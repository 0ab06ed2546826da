from datetime import date

import pytest

from calkit import business_days, count_business_days, date_range, parse_date


def test_parse_date():
    assert parse_date("2024-02-29") == date(2024, 2, 29)
    with pytest.raises(ValueError):
        parse_date("29/02/2024")


def test_range_starts_at_start():
    assert date_range("2024-01-01", "2024-01-10")[0] == date(2024, 1, 1)


def test_range_is_consecutive():
    days = date_range("2024-02-27", "2024-03-02")
    assert all((b - a).days == 1 for a, b in zip(days, days[1:]))


def test_step_must_be_positive():
    with pytest.raises(ValueError):
        date_range("2024-01-01", "2024-01-05", step_days=0)


def test_weekend_is_not_business():
    assert business_days("2024-03-09", "2024-03-10") == []


def test_holidays_are_excluded():
    assert date(2024, 3, 5) not in business_days("2024-03-04", "2024-03-08", holidays=["2024-03-05"])


def test_monday_to_friday_is_five_days():
    assert count_business_days("2024-03-04", "2024-03-08") == 5
