"""Splitting one line of delimited text into fields."""

QUOTE = '"'


class ParseError(ValueError):
    """The line is not valid delimited text."""


def parse_line(line, delimiter=","):
    """Split ``line`` into a list of field strings.

    Fields may be wrapped in double quotes so they can contain the delimiter. Inside a quoted
    field a literal double quote is written as two double quotes (RFC 4180).
    """
    # Protect escaped quotes so the loop below does not see them as field boundaries.
    line = line.replace(QUOTE * 2, "\x00")
    fields = []
    current = []
    in_quotes = False
    for ch in line:
        if in_quotes:
            if ch == QUOTE:
                in_quotes = False
            else:
                current.append(ch)
        elif ch == QUOTE:
            in_quotes = True
        elif ch == delimiter:
            fields.append("".join(current))
            current = []
        else:
            current.append(ch)
    if in_quotes:
        raise ParseError(f"unterminated quoted field in line: {line!r}")
    fields.append("".join(current))
    return [f.replace("\x00", QUOTE) for f in fields]
