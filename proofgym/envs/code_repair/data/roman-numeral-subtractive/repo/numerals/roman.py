"""Converting between integers and canonical Roman numerals."""

VALUES = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}

_SYMBOLS = [
    (1000, "M"), (900, "CM"), (500, "D"), (400, "CD"),
    (100, "C"), (90, "XC"), (50, "L"), (40, "XL"),
    (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I"),
]


def to_roman(number):
    """The canonical Roman numeral for 1 <= number <= 3999."""
    if not isinstance(number, int) or not 1 <= number <= 3999:
        raise ValueError(f"only integers from 1 to 3999 have a Roman numeral, got {number!r}")
    parts = []
    for value, symbol in _SYMBOLS:
        count, number = divmod(number, value)
        parts.append(symbol * count)
    return "".join(parts)


def from_roman(text):
    """The integer value of a canonical Roman numeral (case-insensitive)."""
    numeral = text.strip().upper()
    if not numeral or any(ch not in VALUES for ch in numeral):
        raise ValueError(f"not a Roman numeral: {text!r}")
    total = 0
    for i, ch in enumerate(numeral):
        value = VALUES[ch]
        # A smaller symbol before a larger one is subtracted (IV = 4, CM = 900).
        if i + 1 < len(numeral) - 1 and value < VALUES[numeral[i + 1]]:
            total -= value
        else:
            total += value
    if total < 1 or total > 3999 or to_roman(total) != numeral:
        raise ValueError(f"{text!r} is not a canonical Roman numeral")
    return total
