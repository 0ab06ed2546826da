"""Reading and writing the value a pointer refers to."""

from jptr.pointer import PointerError, parse_pointer


def _step(node, token, pointer):
    if isinstance(node, dict):
        if token not in node:
            raise PointerError(f"{pointer!r}: no key {token!r}")
        return node[token]
    if isinstance(node, list):
        if not token.isdigit() or (token != "0" and token.startswith("0")):
            raise PointerError(f"{pointer!r}: {token!r} is not an array index")
        index = int(token)
        if index >= len(node):
            raise PointerError(f"{pointer!r}: index {index} is out of range")
        return node[index]
    raise PointerError(f"{pointer!r}: cannot descend into {type(node).__name__}")


def resolve(document, pointer):
    """The value ``pointer`` refers to in ``document``."""
    node = document
    for token in parse_pointer(pointer):
        node = _step(node, token, pointer)
    return node


def set_value(document, pointer, value):
    """Set the value at ``pointer`` (its parent must exist); ``-`` appends to an array."""
    tokens = parse_pointer(pointer)
    if not tokens:
        raise PointerError("cannot replace the whole document")
    parent = document
    for token in tokens[:-1]:
        parent = _step(parent, token, pointer)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        else:
            _step(parent, last, pointer)
            parent[int(last)] = value
    else:
        raise PointerError(f"{pointer!r}: cannot set a value inside {type(parent).__name__}")
    return document
