# PROOFGYM-CANARY date-range-inclusive-end 7f3c9b2e
from datetime import date

from calkit import business_days, count_business_days, date_range


def test_end_is_included():
    assert date_range("2024-02-27", "2024-03-01") == [
        date(2024, 2, 27), date(2024, 2, 28), date(2024, 2, 29), date(2024, 3, 1)]


def test_single_day_range():
    assert date_range("2024-05-05", "2024-05-05") == [date(2024, 5, 5)]


def test_start_after_end_is_empty():
    assert date_range("2024-05-06", "2024-05-05") == []


def test_step_landing_on_end():
    assert date_range("2024-01-01", "2024-01-05", step_days=2) == [
        date(2024, 1, 1), date(2024, 1, 3), date(2024, 1, 5)]


def test_step_not_landing_on_end():
    assert date_range("2024-01-01", "2024-01-06", step_days=2) == [
        date(2024, 1, 1), date(2024, 1, 3), date(2024, 1, 5)]


def test_single_business_day():
    assert count_business_days("2024-03-06", "2024-03-06") == 1


def test_request_ending_on_holiday():
    days = business_days("2024-12-23", "2024-12-26", holidays=["2024-12-25", "2024-12-26"])
    assert days == [date(2024, 12, 23), date(2024, 12, 24)]


def test_two_weeks_leave():
    assert count_business_days("2024-07-01", "2024-07-14") == 10
    assert count_business_days("2024-07-01", "2024-07-12") == 10


def test_fortnightly_pay_dates():
    assert date_range("2024-01-05", "2024-02-02", step_days=14) == [
        date(2024, 1, 5), date(2024, 1, 19), date(2024, 2, 2)]
    assert date_range("2024-01-05", "2024-02-01", step_days=14) == [date(2024, 1, 5), date(2024, 1, 19)]
