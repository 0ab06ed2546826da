"""ledger: money amounts and bill splitting."""

from ledger.money import CENT, format_money, to_decimal
from ledger.split import split_by_weights, split_evenly

__all__ = ["CENT", "format_money", "split_by_weights", "split_evenly", "to_decimal"]
