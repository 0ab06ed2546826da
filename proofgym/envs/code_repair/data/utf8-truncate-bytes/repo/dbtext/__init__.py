"""dbtext: fitting text into byte-limited columns."""

from dbtext.columns import Column, fit_record
from dbtext.truncate import byte_length, truncate_bytes

__all__ = ["Column", "byte_length", "fit_record", "truncate_bytes"]
