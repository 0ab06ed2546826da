import pytest

from numerals import convert, from_roman, to_roman


def test_to_roman_examples():
    assert to_roman(4) == "IV"
    assert to_roman(1994) == "MCMXCIV"
    assert to_roman(3999) == "MMMCMXCIX"


def test_to_roman_range():
    with pytest.raises(ValueError):
        to_roman(0)
    with pytest.raises(ValueError):
        to_roman(4000)


def test_from_roman_additive():
    assert from_roman("VIII") == 8
    assert from_roman("MDCLXVI") == 1666


def test_from_roman_rejects_non_canonical():
    with pytest.raises(ValueError):
        from_roman("IIII")


def test_from_roman_rejects_garbage():
    with pytest.raises(ValueError):
        from_roman("XQ")


def test_convert_decimal_token():
    assert convert(" 12 ") == "XII"


def test_from_roman_subtractive_at_the_end():
    assert from_roman("XIV") == 14
