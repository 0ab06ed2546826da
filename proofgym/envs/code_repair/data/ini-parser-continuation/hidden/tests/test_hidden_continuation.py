# PROOFGYM-CANARY ini-parser-continuation 7f3c9b2e
from confparse import Config, parse_ini


def test_tab_indented_continuation():
    data = parse_ini("[build]\nflags = -O2\n\t-Wall\n\t-Wextra\n")
    assert data == {"build": {"flags": "-O2\n-Wall\n-Wextra"}}


def test_continuation_that_looks_like_a_key():
    data = parse_ini("[run]\nargs =\n  --level=3\n  --name: x\nnext = 1\n")
    assert data == {"run": {"args": "--level=3\n--name: x", "next": "1"}}


def test_blank_line_ends_the_value():
    data = parse_ini("[s]\na = 1\n  2\n\nb = 3\n")
    assert data == {"s": {"a": "1\n2", "b": "3"}}


def test_continuation_after_colon_key():
    data = parse_ini("[mail]\nrecipients: ops@example.org\n    dev@example.org\n")
    assert Config(data).getlist("mail", "recipients") == ["ops@example.org", "dev@example.org"]


def test_mixed_indentation_list():
    config = Config.from_text("[app]\nhosts =\n  a.example, b.example\n\tc.example\n")
    assert config.getlist("app", "hosts") == ["a.example", "b.example", "c.example"]


def test_indented_section_body_without_previous_key():
    assert parse_ini("[s]\n  key = value\n") == {"s": {"key": "value"}}


def test_comment_lines_are_still_skipped():
    assert parse_ini("[s]\n# x = 1\nk = v\n") == {"s": {"k": "v"}}
