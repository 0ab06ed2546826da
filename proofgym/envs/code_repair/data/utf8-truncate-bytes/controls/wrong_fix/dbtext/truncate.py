"""Truncating text to a number of UTF-8 bytes."""


def byte_length(text):
    """Length of ``text`` in UTF-8 bytes."""
    return len(text.encode("utf-8"))


def truncate_bytes(text, max_bytes, ellipsis=""):
    """The longest prefix of ``text`` that fits in ``max_bytes`` UTF-8 bytes.

    When ``text`` has to be cut, ``ellipsis`` is appended and counts against the limit. A character
    is never split: the result is always valid text and always a prefix of ``text`` (plus ellipsis).
    """
    if max_bytes < 0:
        raise ValueError(f"max_bytes must not be negative, got {max_bytes}")
    if byte_length(text) <= max_bytes:
        return text
    room = max_bytes - byte_length(ellipsis)
    if room < 0:
        raise ValueError(f"the ellipsis {ellipsis!r} alone is longer than {max_bytes} bytes")
    prefix = text.encode("utf-8")[:room].decode("utf-8", errors="replace")
    return prefix + ellipsis
