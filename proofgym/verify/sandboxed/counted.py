"""How many times a hidden test's ``for`` loop runs, where the test file alone says.

:mod:`proofgym.verify.sandboxed.withheld` pins a withheld check in such a loop to exactly that
many observations: the count is the host's, evaluated from the source, never the run's, so code
under test that patches ``zip`` in the test's process or cuts a module table short observes too
little and its test fails. Counted: a literal, ``range`` of literals, a module *table*
(:func:`tables`), and ``zip``, ``enumerate``, ``sorted``, ``reversed``, ``list``, ``tuple``,
``.items()``/``.keys()``/``.values()`` of such; anything else the run counts.
"""

from __future__ import annotations

import ast

__all__ = ["iterations", "literal", "tables"]


def literal(node: ast.expr) -> tuple[bool, object]:
    """``(True, value)`` for a literal expression (``...`` is none), else ``(False, None)``."""
    if isinstance(node, ast.Constant) and node.value is Ellipsis:
        return False, None
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None
    return True, value


def iterations(node: ast.expr, tables: dict[str, object]) -> int | None:
    """How many times a ``for`` over ``node`` runs, where the source alone says: a literal, a
    table of the module (:func:`tables`), ``range`` of literals, ``enumerate``, ``zip``,
    ``sorted``, ``reversed``, ``list``, ``tuple`` of such, a dict's ``items``/``keys``/``values``;
    else ``None``. The host pins the count: a run whose ``zip`` (or table) was patched to
    yield less observes too little and fails."""
    value = _static(node, tables)
    if isinstance(value, range):
        return len(value)
    if not isinstance(value, (list, tuple, dict, set, frozenset, str, bytes)):
        return None
    return len(value)


_MISSING = object()


def _static(node: ast.expr, tables: dict[str, object]) -> object:
    """The value of an iterable expression the host can evaluate (what :func:`iterations`
    names; only its length is used), else ``_MISSING``."""
    if isinstance(node, ast.Name):
        return tables.get(node.id, _MISSING)
    if isinstance(node, ast.Call) and not node.keywords and \
            not any(isinstance(a, ast.Starred) for a in node.args):
        func, args = node.func, node.args
        if isinstance(func, ast.Attribute) and func.attr in ("items", "keys", "values") \
                and not args:
            inner = _static(func.value, tables)
            return list(getattr(inner, func.attr)()) if type(inner) is dict else _MISSING
        if not isinstance(func, ast.Name):
            return _MISSING
        if func.id == "range" and 1 <= len(args) <= 3:
            ok = [literal(a) for a in args]
            if all(k for k, _ in ok) and all(type(v) is int for _, v in ok):
                try:
                    return range(*(v for _, v in ok))
                except (ValueError, OverflowError):
                    return _MISSING
            return _MISSING
        values = [_static(a, tables) for a in args]
        if any(v is _MISSING or isinstance(v, (int, float)) for v in values):
            return _MISSING
        try:
            if func.id == "zip" and values:
                return list(zip(*values, strict=False))
            if func.id in ("enumerate", "sorted", "reversed", "list", "tuple") and len(values) == 1:
                return list(values[0])
        except TypeError:  # sorted over values that do not compare
            return _MISSING
        return _MISSING
    ok, value = literal(node)
    return value if ok else _MISSING


#: Methods of a table that leave it as it is.
_READS = {"items", "keys", "values", "get", "count", "index"}


def tables(module: ast.Module) -> dict[str, object]:
    """Module-level names bound once to a literal (``CASES = [...]``), never rebound, deleted,
    declared ``global`` or shadowed (an argument, an import) anywhere in the file, and read only
    where nothing can change them in place (a ``for``'s iterable, through the builtins
    :func:`_static` evaluates and ``len``; a subscript, a comparison): never handed to code
    under test, which may honestly consume a list it is given. An honest run iterates over
    exactly that literal."""
    candidates: dict[str, object] = {}
    for stmt in module.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and \
                isinstance(stmt.targets[0], ast.Name):
            ok, value = literal(stmt.value)
            if ok and isinstance(value, (list, tuple, dict, str, bytes, set, frozenset)):
                candidates[stmt.targets[0].id] = value
    parents = {id(c): p for p in ast.walk(module) for c in ast.iter_child_nodes(p)}
    bound: dict[str, int] = {}
    for node in ast.walk(module):
        names: list[str] = []
        if isinstance(node, ast.Name):
            if not isinstance(node.ctx, ast.Load) or not _read_only(node, parents):
                names = [node.id]
        elif isinstance(node, ast.arg):
            names = [node.arg]
        elif isinstance(node, ast.alias):
            names = [node.asname or node.name.split(".")[0]]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names = list(node.names) * 2  # never a table
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            names = [node.name]
        elif isinstance(node, ast.MatchMapping) and node.rest:
            names = [node.rest]
        for name in names:
            bound[name] = bound.get(name, 0) + 1
    if "*" in bound:  # a star import may rebind any of them
        return {}
    return {name: value for name, value in candidates.items() if bound.get(name) == 1}


#: Builtins that read a table without changing it (and that :func:`_static` evaluates).
_WRAPPERS = {"zip", "enumerate", "sorted", "reversed", "list", "tuple", "len"}


def _read_only(node: ast.Name, parents: dict[int, ast.AST]) -> bool:
    """Whether this load of a name is a read nothing can change the value through."""
    child: ast.AST = node
    while True:
        at = parents.get(id(child))
        if (isinstance(at, ast.For) and at.iter is child) or isinstance(at, ast.Compare) or \
                (isinstance(at, ast.Subscript) and at.value is child):
            return True
        if isinstance(at, ast.Attribute) and at.attr in _READS and \
                isinstance(parents.get(id(at)), ast.Call) and parents[id(at)].func is at:
            child = parents[id(at)]
        elif isinstance(at, ast.Call) and isinstance(at.func, ast.Name) and \
                at.func.id in _WRAPPERS and child in at.args:
            child = at
        else:
            return False
