"""Converting a token in whichever direction fits it."""

from numerals.roman import from_roman, to_roman


def convert(token):
    """An int for a Roman numeral token, a numeral for a decimal token."""
    token = token.strip()
    if token.isdigit():
        return to_roman(int(token))
    return from_roman(token)
