"""Listing tests from source: the test items of a file, read from its AST, never by importing it.

Test functions are ``test*`` functions at module level (a parametrized one is one test: its process
runs all its cases) and the own ``test*`` methods of the classes pytest collects
(:func:`collected_classes`: ``Test*`` classes without ``__init__`` and any ``unittest.TestCase``
subclass, whatever its name). Also the AST helpers the other mutant modules share (parsing under
the one AST lock, copying nodes).
"""

from __future__ import annotations

import ast
import contextlib
import gc
import hashlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TypeVar

from proofgym.core.errors import TestSourceError

_T = TypeVar("_T")

@dataclass(frozen=True)
class TestItem:
    """One test function of a file: ``cls`` is its ``Test*`` class, if any."""

    file: str
    name: str
    cls: str | None = None
    imported: bool = False  # ``from helpers import test_x``: collected here, defined elsewhere
    #: ``@pytest.mark.parametrize``: one id for all its cases, which run in one test process
    parametrized: bool = False

    @property
    def node_id(self) -> str:
        return "::".join(p for p in (self.file, self.cls, self.name) if p)


#: CPython 3.11 keeps the AST converter's recursion depth in one global, so two threads
#: building or converting ASTs at once can fail with "SystemError: AST constructor recursion
#: depth mismatch" (python/cpython#106905, fixed in 3.12): graders run on threads, so the
#: entry points below take turns.
_AST_LOCK = threading.RLock()
_depth = 0  # how deep the holder of _AST_LOCK is in ast_work sections (guarded by the lock)
_paused = False  # whether the outermost section turned the cyclic collector off


@contextlib.contextmanager
def ast_work() -> Iterator[None]:
    """Hold the AST lock, with the cyclic garbage collector paused until the outermost section
    ends. Parsing, copying and rewriting test files allocate tens of thousands of nodes, which
    hold no reference cycles; each allocation burst set off collections that walk every object
    of the process (its loaded modules, a task set's manifest), about 40% of a grading's CPU on
    the host (bench/p2p_cost.py)."""
    global _depth, _paused
    with _AST_LOCK:
        if _depth == 0:
            _paused = gc.isenabled()
            gc.disable()
        _depth += 1
        try:
            yield
        finally:
            _depth -= 1
            if _depth == 0 and _paused:
                gc.enable()


def list_tests(path: str, source: bytes | str) -> list[TestItem]:
    """The test items of one test file, from its AST (nothing is imported or run)."""
    raw = source.encode() if isinstance(source, str) else bytes(source)
    key = (path, hashlib.sha256(raw).digest())
    with ast_work():
        items = _LISTED.get(key)
        if items is None:
            # a grading lists each test file several times (its tests, the batch's, the
            # canaries'): parsed once per content
            items = _LISTED[key] = tuple(_list_tests(path, source))
            while len(_LISTED) > _LISTED_MAX:
                _LISTED.pop(next(iter(_LISTED)))
        return list(items)


#: :func:`list_tests` of recent files, by path and content digest (the items are immutable).
_LISTED: dict[tuple[str, bytes], tuple[TestItem, ...]] = {}
_LISTED_MAX = 512


def _list_tests(path: str, source: bytes | str) -> list[TestItem]:
    tree = _parse(path, source)
    items: list[TestItem] = []
    classes = collected_classes(tree)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            items.append(TestItem(path, node.name, parametrized=bool(_parameters(node))))
        elif isinstance(node, ast.ImportFrom):
            items += [TestItem(path, a.asname or a.name, imported=True) for a in node.names
                      if (a.asname or a.name).startswith("test")]
        elif isinstance(node, ast.ClassDef) and node.name in classes:
            several = bool(_parameters(node))
            items += [TestItem(path, m.name, node.name, parametrized=several or bool(_parameters(m)))
                      for m in node.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
                      and m.name.startswith("test")]
    return items


def _parameters(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
                ) -> list[tuple[list[str], list[ast.expr]]]:
    """The ``parametrize`` decorators of a test or class: (argument names, the cases)."""
    out = []
    for deco in node.decorator_list:
        if not (isinstance(deco, ast.Call) and _base_name(deco.func) == "parametrize"):
            continue
        names_node = deco.args[0] if deco.args else next(
            (k.value for k in deco.keywords if k.arg == "argnames"), None)
        cases = deco.args[1] if len(deco.args) > 1 else next(
            (k.value for k in deco.keywords if k.arg == "argvalues"), None)
        if isinstance(names_node, ast.Constant) and isinstance(names_node.value, str):
            names = [n.strip() for n in names_node.value.split(",") if n.strip()]
        elif isinstance(names_node, (ast.List, ast.Tuple)) and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in names_node.elts):
            names = [e.value for e in names_node.elts]  # type: ignore[attr-defined]
        else:
            names = []
        out.append((names, list(cases.elts) if isinstance(cases, (ast.List, ast.Tuple)) else []))
    return out


def _base_name(node: ast.expr) -> str:
    return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")


def collected_classes(tree: ast.Module) -> dict[str, ast.ClassDef]:
    """The module-level classes pytest collects, by name: ``Test*`` classes without
    ``__init__``, and every class deriving from a ``*TestCase`` (``unittest.TestCase``, a
    project's own ``TestCase``) or from such a class of the module, whatever its name (pytest
    collects ``unittest.TestCase`` subclasses by type); none that sets ``__test__ = False``.
    Own methods only: tests a class inherits are listed where they are defined."""
    found: dict[str, ast.ClassDef] = {}
    unit: set[str] = set()
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        if any(isinstance(s, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__test__"
                                                 for t in s.targets)
               and isinstance(s.value, ast.Constant) and not s.value.value for s in node.body):
            continue
        if any(_base_name(b).endswith("TestCase") or _base_name(b) in unit for b in node.bases):
            unit.add(node.name)
            found[node.name] = node
        elif node.name.startswith("Test") and not any(
                isinstance(m, ast.FunctionDef) and m.name == "__init__" for m in node.body):
            found[node.name] = node
    return found


def _test_functions(tree: ast.Module) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    found = []
    classes = collected_classes(tree)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            found.append((node.name, node))
        elif isinstance(node, ast.ClassDef) and node.name in classes:
            found += [(f"{node.name}::{m.name}", m) for m in node.body
                      if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
                      and m.name.startswith("test")]
    return found


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and \
        isinstance(stmt.value.value, str)


def _parse(path: str, source: bytes | str) -> ast.Module:
    try:
        return ast.parse(source, filename=path)
    except (SyntaxError, ValueError) as exc:
        raise TestSourceError(f"{path}: not valid Python ({exc})") from None


def _copy(node: ast.stmt) -> ast.stmt:
    return _clone(node)


def _clone(value: _T) -> _T:
    """A deep copy of an AST (nodes and lists anew; constants, names and positions shared, as
    they are immutable): ``copy.deepcopy`` does the same with a memo and the pickle protocol at
    some ten times the cost, and a grading copies a few thousand nodes. A node that appears
    twice in ``value`` comes out as two nodes (ASTs from ``ast.parse`` share none)."""
    if isinstance(value, ast.AST):
        new = value.__class__.__new__(value.__class__)
        new.__dict__.update({k: _clone(v) for k, v in value.__dict__.items()})
        return new
    if isinstance(value, list):
        return [_clone(v) for v in value]  # type: ignore[return-value]
    return value
