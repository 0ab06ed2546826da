"""Parsing INI text into ``{section: {key: value}}``."""

import re

_KEY_VALUE = re.compile(r"^([^=:]+?)\s*[=:]\s*(.*)$")


class ParseError(ValueError):
    """The text is not valid INI; the message names the line."""


def parse_ini(text):
    """``{section: {key: value}}`` for INI ``text``. Continuation lines extend the previous value."""
    sections = {}
    current = None
    last_key = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            last_key = None  # a blank line ends a multi-line value
            continue
        if line.startswith(("#", ";")):
            continue
        if raw.startswith("  ") and last_key is not None:
            previous = current[last_key]
            current[last_key] = f"{previous}\n{line}" if previous else line
            continue
        if line.startswith("[") and line.endswith("]"):
            name = line[1:-1].strip()
            if not name:
                raise ParseError(f"line {number}: empty section name")
            current = sections.setdefault(name, {})
            last_key = None
            continue
        if current is None:
            raise ParseError(f"line {number}: {raw!r} comes before any [section]")
        match = _KEY_VALUE.match(line)
        if match is None:
            raise ParseError(f"line {number}: expected 'key = value', got {raw!r}")
        key, value = match.groups()
        current[key] = value
        last_key = key
    return sections
