"""numerals: Roman numeral conversion."""

from numerals.convert import convert
from numerals.roman import from_roman, to_roman

__all__ = ["convert", "from_roman", "to_roman"]
