# PROOFGYM-CANARY roman-numeral-subtractive 7f3c9b2e
import pytest

from numerals import convert, from_roman, to_roman


def test_round_trip_every_number():
    for number in range(1, 4000):
        assert from_roman(to_roman(number)) == number


def test_trailing_tens_and_hundreds_pairs():
    assert from_roman("XC") == 90
    assert from_roman("XL") == 40
    assert from_roman("MCM") == 1900
    assert from_roman("CD") == 400


def test_year_numerals():
    assert from_roman("MCMXCIV") == 1994
    assert from_roman("MMXXIV") == 2024


def test_lowercase_subtractive():
    assert from_roman("xix") == 19


def test_convert_roman_token():
    assert convert("cmxc") == 990


def test_invalid_subtractive_pairs_rejected():
    for bad in ("IL", "IC", "VX", "XM", "IIV"):
        with pytest.raises(ValueError):
            from_roman(bad)


def test_single_symbols():
    assert [from_roman(s) for s in "IVXLCDM"] == [1, 5, 10, 50, 100, 500, 1000]
