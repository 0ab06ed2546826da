"""Applying column limits to records."""

from dataclasses import dataclass

from dbtext.truncate import truncate_bytes


@dataclass(frozen=True)
class Column:
    name: str
    max_bytes: int
    ellipsis: str = ""


def fit_record(record, columns):
    """A copy of ``record`` with every string value cut to its column's byte limit."""
    limits = {c.name: c for c in columns}
    fitted = {}
    for key, value in record.items():
        column = limits.get(key)
        if column is not None and isinstance(value, str):
            value = truncate_bytes(value, column.max_bytes, column.ellipsis)
        fitted[key] = value
    return fitted
