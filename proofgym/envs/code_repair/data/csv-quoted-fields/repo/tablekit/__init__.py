"""tablekit: a small reader for comma-separated text."""

from tablekit.parser import ParseError, parse_line
from tablekit.reader import read_rows, to_dicts

__all__ = ["ParseError", "parse_line", "read_rows", "to_dicts"]
