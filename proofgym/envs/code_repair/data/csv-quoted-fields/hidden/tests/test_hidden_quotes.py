# PROOFGYM-CANARY csv-quoted-fields 7f3c9b2e
from tablekit import parse_line, read_rows, to_dicts


def test_escaped_quote_at_start_and_end():
    assert parse_line('"""quoted"""') == ['"quoted"']


def test_field_that_is_only_an_escaped_quote():
    assert parse_line('x,"",""""') == ["x", "", '"']


def test_escaped_quote_next_to_delimiter():
    assert parse_line('"a"",b",c') == ['a",b', "c"]


def test_escaped_quotes_with_other_delimiter():
    assert parse_line('"5"" pipe";ok', delimiter=";") == ['5" pipe', "ok"]


def test_to_dicts_keeps_escaped_quotes():
    text = 'title,size\n"The ""Big"" One",L\n"plain",M\n'
    assert to_dicts(text) == [{"title": 'The "Big" One', "size": "L"},
                              {"title": "plain", "size": "M"}]


def test_empty_quoted_field_stays_empty():
    assert parse_line('a,"",b') == ["a", "", "b"]


def test_read_rows_quoted_commas():
    assert read_rows('k,v\n"a,b","c"\n') == [["k", "v"], ["a,b", "c"]]
