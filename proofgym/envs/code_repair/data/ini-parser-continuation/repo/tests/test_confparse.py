import pytest

from confparse import Config, ParseError, parse_ini

BASIC = """
[server]
host = example.org
port: 8080
debug = off
# a comment
; another comment
[paths]
root=/srv/app
"""


def test_sections_and_keys():
    assert parse_ini(BASIC) == {
        "server": {"host": "example.org", "port": "8080", "debug": "off"},
        "paths": {"root": "/srv/app"},
    }


def test_typed_getters():
    config = Config.from_text(BASIC)
    assert config.getint("server", "port") == 8080
    assert config.getbool("server", "debug") is False
    assert config.get("server", "missing", "dflt") == "dflt"


def test_missing_key_raises():
    with pytest.raises(KeyError):
        Config.from_text(BASIC).get("server", "nope")


def test_key_before_section_is_an_error():
    with pytest.raises(ParseError, match="line 1"):
        parse_ini("orphan = 1\n[s]\n")


def test_single_line_list():
    config = Config.from_text("[app]\nplugins = auth, metrics\n")
    assert config.getlist("app", "plugins") == ["auth", "metrics"]


def test_indented_continuation_lines():
    config = Config.from_text("[app]\nplugins =\n    auth\n    metrics\n")
    assert config.getlist("app", "plugins") == ["auth", "metrics"]
