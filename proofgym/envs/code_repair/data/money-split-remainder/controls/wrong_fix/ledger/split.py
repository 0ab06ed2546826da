"""Splitting a bill into shares that add up to the cent."""

from decimal import ROUND_HALF_UP, Decimal

from ledger.money import CENT, to_decimal


def split_by_weights(total, weights):
    """Shares of ``total`` proportional to ``weights``, in whole cents, summing exactly to ``total``.

    Each share is within one cent of its exact proportional value. Leftover cents go to the shares
    with the largest remainders; on a tie the earlier share gets the cent.
    """
    total = to_decimal(total)
    if total < 0:
        raise ValueError(f"cannot split a negative total ({total})")
    weights = [Decimal(w) for w in weights]
    if not weights or any(w < 0 for w in weights) or sum(weights) == 0:
        raise ValueError(f"weights must be non-negative and not all zero, got {weights}")
    weight_sum = sum(weights)
    shares = [(total * w / weight_sum).quantize(CENT, rounding=ROUND_HALF_UP) for w in weights]
    # Rounding can leave the shares a few cents off; the last share absorbs the difference.
    shares[-1] += total - sum(shares)
    return shares


def split_evenly(total, parts):
    """``total`` split into ``parts`` shares that differ by at most one cent, larger shares first."""
    if parts < 1:
        raise ValueError(f"need at least one part, got {parts}")
    return split_by_weights(total, [1] * parts)
