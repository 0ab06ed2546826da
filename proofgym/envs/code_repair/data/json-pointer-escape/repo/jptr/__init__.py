"""jptr: JSON Pointer (RFC 6901)."""

from jptr.document import resolve, set_value
from jptr.pointer import PointerError, format_pointer, parse_pointer

__all__ = ["PointerError", "format_pointer", "parse_pointer", "resolve", "set_value"]
