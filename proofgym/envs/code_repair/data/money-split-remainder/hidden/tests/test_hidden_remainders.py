# PROOFGYM-CANARY money-split-remainder 7f3c9b2e
from decimal import Decimal

from ledger import split_by_weights, split_evenly


def d(*values):
    return [Decimal(v) for v in values]


def test_extra_cent_goes_to_first_share():
    assert split_evenly("100.00", 3) == d("33.34", "33.33", "33.33")


def test_tiny_total_split():
    assert split_evenly("0.10", 3) == d("0.04", "0.03", "0.03")
    assert split_evenly("0.05", 3) == d("0.02", "0.02", "0.01")


def test_shares_differ_by_at_most_one_cent():
    for cents in range(0, 400, 7):
        total = Decimal(cents) / 100
        for parts in range(1, 9):
            shares = split_evenly(total, parts)
            assert sum(shares) == total
            assert max(shares) - min(shares) <= Decimal("0.01")
            assert shares == sorted(shares, reverse=True)


def test_more_parts_than_cents():
    assert split_evenly("0.02", 4) == d("0.01", "0.01", "0.00", "0.00")


def test_weighted_largest_remainder():
    # exact shares: 3.333..., 6.666... -> the larger remainder gets the leftover cent
    assert split_by_weights("10.00", [1, 2]) == d("3.33", "6.67")
    assert split_by_weights("1.00", [1, 1, 1, 3]) == d("0.17", "0.17", "0.16", "0.50")


def test_weighted_sum_is_exact():
    weights = [3, 5, 7, 11]
    shares = split_by_weights("123.45", weights)
    assert sum(shares) == Decimal("123.45")
    for share, w in zip(shares, weights):
        assert abs(share - Decimal("123.45") * w / 26) < Decimal("0.01")


def test_zero_weight_gets_nothing():
    assert split_by_weights("5.00", [0, 1, 1]) == d("0.00", "2.50", "2.50")
