"""Reading whole documents: rows, and rows keyed by a header line."""

from tablekit.parser import ParseError, parse_line


def read_rows(text, delimiter=","):
    """Every non-empty line of ``text`` parsed into a list of fields."""
    return [parse_line(line, delimiter) for line in text.splitlines() if line.strip()]


def to_dicts(text, delimiter=","):
    """Rows as dicts keyed by the first (header) row."""
    rows = read_rows(text, delimiter)
    if not rows:
        return []
    header, body = rows[0], rows[1:]
    records = []
    for number, row in enumerate(body, start=2):
        if len(row) != len(header):
            raise ParseError(f"row {number} has {len(row)} fields, the header has {len(header)}")
        records.append(dict(zip(header, row)))
    return records
