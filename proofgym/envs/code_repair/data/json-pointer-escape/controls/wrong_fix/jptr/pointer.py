"""Parsing and formatting JSON Pointer strings."""


class PointerError(ValueError):
    """The pointer is malformed or does not match the document."""


def parse_pointer(pointer):
    """The reference tokens of ``pointer``: ``"/a/b"`` -> ``["a", "b"]``; ``""`` -> ``[]``."""
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise PointerError(f"a JSON pointer must be empty or start with '/', got {pointer!r}")
    return [token.replace("~0", "~").replace("~1", "/") for token in pointer[1:].split("/")]


def format_pointer(tokens):
    """The pointer string for ``tokens``, escaping ``~`` as ``~0`` and ``/`` as ``~1``."""
    return "".join("/" + str(t).replace("~", "~0").replace("/", "~1") for t in tokens)
