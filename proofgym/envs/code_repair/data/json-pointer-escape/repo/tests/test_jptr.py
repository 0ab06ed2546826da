import pytest

from jptr import PointerError, format_pointer, parse_pointer, resolve, set_value

DOC = {"foo": ["bar", "baz"], "": 0, "a b": 1, "nested": {"x": {"y": True}}}


def test_whole_document():
    assert resolve(DOC, "") is DOC


def test_simple_paths():
    assert resolve(DOC, "/foo/1") == "baz"
    assert resolve(DOC, "/nested/x/y") is True
    assert resolve(DOC, "/") == 0
    assert resolve(DOC, "/a b") == 1


def test_bad_index():
    with pytest.raises(PointerError):
        resolve(DOC, "/foo/01")
    with pytest.raises(PointerError):
        resolve(DOC, "/foo/7")


def test_must_start_with_slash():
    with pytest.raises(PointerError):
        parse_pointer("foo")


def test_format_pointer_escapes():
    assert format_pointer(["paths", "/users", "a~b"]) == "/paths/~1users/a~0b"


def test_set_value_appends():
    doc = {"items": [1]}
    assert set_value(doc, "/items/-", 2) == {"items": [1, 2]}


def test_key_with_slash():
    doc = {"paths": {"/users": {"get": {"summary": "List users"}}}}
    assert resolve(doc, "/paths/~1users/get/summary") == "List users"
