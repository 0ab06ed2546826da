import pytest

from tablekit import ParseError, parse_line, read_rows, to_dicts


def test_plain_fields():
    assert parse_line("a,b,c") == ["a", "b", "c"]


def test_quoted_field_keeps_delimiter():
    assert parse_line('1,"x, y",z') == ["1", "x, y", "z"]


def test_empty_fields():
    assert parse_line("a,,c,") == ["a", "", "c", ""]


def test_other_delimiter():
    assert parse_line('a;"b;c"', delimiter=";") == ["a", "b;c"]


def test_unterminated_quote_is_an_error():
    with pytest.raises(ParseError):
        parse_line('a,"oops')


def test_read_rows_skips_blank_lines():
    assert read_rows("a,b\n\n1,2\n") == [["a", "b"], ["1", "2"]]


def test_to_dicts():
    assert to_dicts("name,qty\npen,3\ncup,1\n") == [{"name": "pen", "qty": "3"},
                                                     {"name": "cup", "qty": "1"}]


def test_escaped_quotes_inside_quoted_field():
    assert parse_line('1,"He said ""hi""",x') == ["1", 'He said "hi"', "x"]
