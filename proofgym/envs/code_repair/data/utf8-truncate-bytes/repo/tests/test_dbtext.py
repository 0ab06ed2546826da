import pytest

from dbtext import Column, byte_length, fit_record, truncate_bytes


def test_short_text_unchanged():
    assert truncate_bytes("hello", 10) == "hello"


def test_ascii_cut():
    assert truncate_bytes("hello world", 5) == "hello"


def test_ascii_cut_with_ellipsis():
    assert truncate_bytes("hello world", 8, "...") == "hello..."


def test_byte_length():
    assert byte_length("é") == 2


def test_invalid_limits():
    with pytest.raises(ValueError):
        truncate_bytes("abc", -1)
    with pytest.raises(ValueError):
        truncate_bytes("abcdef", 2, "...")


def test_fit_record_leaves_other_fields():
    record = {"name": "abcdef", "age": 41, "city": "Oslo"}
    assert fit_record(record, [Column("name", 3)]) == {"name": "abc", "age": 41, "city": "Oslo"}


def test_accented_text_fits_byte_limit():
    result = truncate_bytes("héllo wörld", 10)
    assert byte_length(result) <= 10
    assert result == "héllo wö"
