from decimal import Decimal

import pytest

from ledger import format_money, split_by_weights, split_evenly, to_decimal


def test_to_decimal_rounds_half_up():
    assert to_decimal("2.675") == Decimal("2.68")
    assert to_decimal(0.1) == Decimal("0.10")


def test_to_decimal_rejects_garbage():
    with pytest.raises(ValueError):
        to_decimal("ten euros")


def test_format_money():
    assert format_money("1234.5") == "1,234.50 EUR"


def test_even_split_without_remainder():
    assert split_evenly("90.00", 3) == [Decimal("30.00")] * 3


def test_weighted_split_without_remainder():
    assert split_by_weights("100", [1, 3]) == [Decimal("25.00"), Decimal("75.00")]


def test_invalid_splits():
    with pytest.raises(ValueError):
        split_evenly("10", 0)
    with pytest.raises(ValueError):
        split_by_weights("10", [0, 0])


def test_three_way_split_adds_up():
    shares = split_evenly("100.00", 3)
    assert sum(shares) == Decimal("100.00")
