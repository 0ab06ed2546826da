"""Parsing and formatting amounts of money."""

from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

CENT = Decimal("0.01")


def to_decimal(amount):
    """``amount`` (str, int, float or Decimal) as a Decimal rounded half-up to whole cents."""
    if isinstance(amount, float):
        amount = repr(amount)  # "0.1", not the binary expansion of 0.1
    try:
        value = Decimal(amount)
    except (InvalidOperation, TypeError):
        raise ValueError(f"not an amount of money: {amount!r}") from None
    if not value.is_finite():
        raise ValueError(f"not an amount of money: {amount!r}")
    return value.quantize(CENT, rounding=ROUND_HALF_UP)


def format_money(amount, currency="EUR"):
    """``1234.5`` -> ``'1,234.50 EUR'``."""
    return f"{to_decimal(amount):,.2f} {currency}"
