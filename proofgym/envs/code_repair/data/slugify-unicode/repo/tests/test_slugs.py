from sluglib import slugify, unique_slug


def test_basic_slug():
    assert slugify("Hello, World!") == "hello-world"


def test_collapses_and_strips_separators():
    assert slugify("  --Python 3.12 -- released!  ") == "python-3-12-released"


def test_custom_separator():
    assert slugify("a b c", separator="_") == "a_b_c"


def test_max_length_does_not_end_with_separator():
    assert slugify("one two three", max_length=8) == "one-two"


def test_unique_slug_appends_counter():
    assert unique_slug("Hello", {"hello", "hello-2"}) == "hello-3"


def test_unique_slug_of_symbols_only():
    assert unique_slug("!!!", set()) == "item"


def test_french_accents():
    assert slugify("Crème brûlée") == "creme-brulee"
