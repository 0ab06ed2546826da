# PROOFGYM-CANARY json-pointer-escape 7f3c9b2e
from jptr import format_pointer, parse_pointer, resolve, set_value

RFC_DOC = {"a/b": 1, "c%d": 2, "e^f": 3, "g|h": 4, "i\\j": 5, "k\"l": 6, " ": 7, "m~n": 8}


def test_rfc6901_examples():
    assert resolve(RFC_DOC, "/a~1b") == 1
    assert resolve(RFC_DOC, "/m~0n") == 8
    assert resolve(RFC_DOC, "/c%d") == 2


def test_tilde_one_literal_key():
    doc = {"~1": "tilde-one", "/": "slash"}
    assert resolve(doc, "/~01") == "tilde-one"
    assert resolve(doc, "/~1") == "slash"


def test_round_trip_tricky_keys():
    for key in ["~1", "~0", "/~", "~/", "a~01b", "~~//", "plain"]:
        assert parse_pointer(format_pointer([key, "x"])) == [key, "x"]


def test_set_value_with_escaped_keys():
    doc = {"content": {}}
    set_value(doc, "/content/application~1json", {"schema": "User"})
    assert doc == {"content": {"application/json": {"schema": "User"}}}


def test_openapi_style_path():
    doc = {"paths": {"/users/{id}": {"get": {"responses": {"200": "ok"}}}}}
    assert resolve(doc, "/paths/~1users~1{id}/get/responses/200") == "ok"


def test_unescaped_keys_still_work():
    assert parse_pointer("/foo/0/") == ["foo", "0", ""]
