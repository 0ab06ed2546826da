"""Tamper detection by mutants: test items listed from source, mutated, renamed and shuffled.

Code under test shares a process with the test it is checked by, so anything that process reports
can be forged (a patched runner, an import hook that swaps test functions, results whose
``__eq__`` is always true, ``os._exit(0)``). A *mutant* is the same test with one expected value
changed; no code that computes a value passes both a test and its mutant. This catches forgery
that passes every test. Every grading lays out each test, real or mutant, alone in a freshly
named file with a freshly named function, in a random order; the mapping back to the real test
ids stays on the host, and a test process sees only its own file
(:mod:`proofgym.verify.sandbox_runner`). A run in which a mutant passes together with its test
was tampered with.

A mutated number is as likely below as above the real value, so a test's value alone does not
say whether it is the real test or the mutant. The remaining limit: code that guesses per test
is right half the time per pair, so with k mutated hidden tests it resolves a task by chance with
probability 2^-k (see "Grading" in ``docs/threat-model.md`` and
``tests/security/test_attack_mutant_pairs.py``).

Tests are listed from the files' AST, never by importing them (importing runs the code under
test). Test functions are ``test*`` functions at module level and ``test*`` methods of ``Test*``
classes without ``__init__`` (pytest's default collection rules).
"""

from __future__ import annotations

import ast
import copy
import random
import string
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from proofgym.core.errors import ProofgymError

_WORDS_A = ("basic", "edge", "empty", "nested", "unicode", "large", "mixed", "repeated", "single",
            "quoted", "invalid", "default", "reversed", "boundary", "sorted", "missing", "extra",
            "long", "short", "simple", "plain", "odd", "even", "first", "last", "many", "zero")
_WORDS_B = ("case", "input", "values", "order", "items", "keys", "range", "fields", "format",
            "limits", "errors", "paths", "names", "rows", "parse", "roundtrip", "spacing",
            "result", "output", "lookup", "update", "split", "merge", "count", "state", "text")

_NEGATE = {ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
           ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Lt: ast.GtE, ast.GtE: ast.Lt,
           ast.Gt: ast.LtE, ast.LtE: ast.Gt}


class TestSourceError(ProofgymError, ValueError):
    """A test file that cannot be parsed, or a wanted test id that is not in its file."""


@dataclass(frozen=True)
class TestItem:
    """One test function of a file: ``cls`` is its ``Test*`` class, if any."""

    file: str
    name: str
    cls: str | None = None
    imported: bool = False  # ``from helpers import test_x``: collected here, defined elsewhere

    @property
    def node_id(self) -> str:
        return "::".join(p for p in (self.file, self.cls, self.name) if p)


#: CPython 3.11 keeps the AST converter's recursion depth in one global, so two threads
#: building or converting ASTs at once can fail with "SystemError: AST constructor recursion
#: depth mismatch" (python/cpython#106905, fixed in 3.12): graders run on threads, so the
#: entry points below take turns.
_AST_LOCK = threading.RLock()


def list_tests(path: str, source: bytes | str) -> list[TestItem]:
    """The test items of one test file, from its AST (nothing is imported or run)."""
    with _AST_LOCK:
        return _list_tests(path, source)


def _list_tests(path: str, source: bytes | str) -> list[TestItem]:
    tree = _parse(path, source)
    items: list[TestItem] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            items.append(TestItem(path, node.name))
        elif isinstance(node, ast.ImportFrom):
            items += [TestItem(path, a.asname or a.name, imported=True) for a in node.names
                      if (a.asname or a.name).startswith("test")]
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test") and not any(
                isinstance(m, ast.FunctionDef) and m.name == "__init__" for m in node.body):
            items += [TestItem(path, m.name, node.name) for m in node.body
                      if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
                      and m.name.startswith("test")]
    return items


@dataclass
class Layout:
    """The test files of one grading and what each generated test id stands for.

    ``files`` are the generated files (workspace-relative path to content); ``run`` the generated
    node ids in the order they run; ``real`` maps a generated id to the test id it *is*;
    ``mutant`` maps a generated id to the test id it is a mutant *of*.
    """

    files: dict[str, bytes] = field(default_factory=dict)
    run: list[str] = field(default_factory=list)
    real: dict[str, str] = field(default_factory=dict)
    mutant: dict[str, str] = field(default_factory=dict)
    unmutable: list[str] = field(default_factory=list)  # real test ids no mutant could be built for


def build_layout(sources: Mapping[str, bytes], wanted: Iterable[str], *,
                 taken: Iterable[str] = (), rng: random.Random | None = None,
                 with_mutants: bool = True, mutate_files: Iterable[str] | None = None) -> Layout:
    """Lay out the ``wanted`` test ids (``file::[Class::]name``, files in ``sources``) and one
    mutant of each (where one can be built) as freshly named single-test files, shuffled.

    ``taken`` are workspace paths the generated files must not use; ``mutate_files`` limits
    mutants to the tests of those files (by default all). Raises
    :class:`TestSourceError` for a wanted id that its file does not define.
    """
    with _AST_LOCK:
        return _build_layout(sources, wanted, taken=taken, rng=rng, with_mutants=with_mutants,
                             mutate_files=mutate_files)


def _build_layout(sources: Mapping[str, bytes], wanted: Iterable[str], *,
                  taken: Iterable[str] = (), rng: random.Random | None = None,
                  with_mutants: bool = True, mutate_files: Iterable[str] | None = None) -> Layout:
    """The implementation of :func:`build_layout` (called with the AST lock held)."""
    rng = rng or random.SystemRandom()
    mutate = set(sources if mutate_files is None else mutate_files)
    wanted = list(dict.fromkeys(wanted))
    trees = {path: _parse(path, src) for path, src in sources.items()}
    listed = {item.node_id: item for path, src in sources.items() for item in list_tests(path, src)}
    missing = [w for w in wanted if w not in listed]
    if missing:
        raise TestSourceError(f"test ids not defined in their files (checked from the source): {missing}")
    used_paths = set(taken) | set(sources)
    used_names: set[str] = set()
    entries: list[tuple[TestItem, ast.Module, str | None]] = []  # (item, module, mutant of)
    layout = Layout()
    for node_id in wanted:
        item = listed[node_id]
        entries.append((item, _isolate(trees[item.file], item), None))
        if with_mutants and not item.imported and item.file in mutate:
            mutated = _isolate(trees[item.file], item)
            if mutate_test(_target(mutated, item), rng, mutated):
                entries.append((item, mutated, node_id))
            else:
                layout.unmutable.append(node_id)
    rng.shuffle(entries)
    for item, module, mutant_of in entries:
        folder = str(PurePosixPath(item.file).parent)
        func = _fresh(rng, used_names, "test_{}_{}")
        path = _fresh_path(rng, used_paths, folder)
        _rename(module, item, func)
        gen_id = f"{path}::{func}"
        if item.cls is not None:
            cls = _fresh(rng, used_names, "Test{}{}", title=True)
            next(n for n in module.body if isinstance(n, ast.ClassDef) and n.name == item.cls).name = cls
            gen_id = f"{path}::{cls}::{func}"
        layout.files[path] = (ast.unparse(ast.fix_missing_locations(module)) + "\n").encode()
        layout.run.append(gen_id)
        if mutant_of is None:
            layout.real[gen_id] = item.node_id
        else:
            layout.mutant[gen_id] = mutant_of
    return layout


def mutate_test(func: ast.FunctionDef | ast.AsyncFunctionDef, rng: random.Random,
                module: ast.Module | None = None) -> bool:
    """Change ``func`` in place so that it must fail wherever the original passes; False when no
    mutation is possible.

    Only asserts that run unconditionally (direct statements of the body, or of a loop over a
    non-empty literal or ``range``) are mutated, in this
    order of preference: an expected value in an ``==`` comparison (``== 3`` -> ``== 5``, one
    character of a string, one element of a container, one argument of ``date(2024, 1, 31)``),
    a literal assigned to a name that such a
    comparison uses (in the test, or at the top of ``module``, which holds only this test), then
    negating the assert's condition (the one mutation whose operator, not a value, differs).
    """
    asserts = [s for s in func.body if isinstance(s, ast.Assert)]
    for loop in func.body:  # a loop over a non-empty literal or range runs its asserts too
        if isinstance(loop, ast.For) and _runs(loop.iter):
            asserts += [s for s in loop.body if isinstance(s, ast.Assert)]
    literal_sides = [side for a in asserts for side in _eq_literals(a.test)]
    rng.shuffle(literal_sides)
    for side in literal_sides:
        if _mutate_literal(side, rng):
            return True
    compared = {n.id for a in asserts for n in _eq_names(a.test)}
    # only a name read nowhere but in that comparison: one that is also an input (``a`` in
    # ``assert matmul(a, identity) == a``) would change on both sides and still pass
    loads = [n.id for n in ast.walk(module if module is not None else func)
             if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]
    expected_only = {name for name in compared if loads.count(name) == 1}
    scopes = [func.body, module.body if module is not None else []]
    assigned = [s.value for body in scopes for s in body if isinstance(s, ast.Assign)
                and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
                and s.targets[0].id in expected_only and _is_literal(s.value)]
    rng.shuffle(assigned)
    for value in assigned:
        if _mutate_literal(value, rng):
            return True
    if asserts:
        _negate(rng.choice(asserts))
        return True
    return False


# ------------------------------------------------------------------------------------ internals
def _parse(path: str, source: bytes | str) -> ast.Module:
    try:
        return ast.parse(source, filename=path)
    except (SyntaxError, ValueError) as exc:
        raise TestSourceError(f"{path}: not valid Python ({exc})") from None


def _isolate(tree: ast.Module, item: TestItem) -> ast.Module:
    """A copy of the module keeping everything except the *other* tests (helpers, fixtures,
    imports and constants stay, so every generated file has its source file's shape)."""
    keep: list[ast.stmt] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            if item.cls is None and node.name == item.name:
                keep.append(_copy(node))
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            if node.name == item.cls:
                cls = _copy(node)
                cls.body = [m for m in cls.body if not (
                    isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
                    and m.name.startswith("test") and m.name != item.name)]
                keep.append(cls)
        elif isinstance(node, ast.ImportFrom) and any(
                (a.asname or a.name).startswith("test") for a in node.names):
            imp = _copy(node)
            imp.names = [a for a in imp.names if not (a.asname or a.name).startswith("test")
                         or (item.imported and (a.asname or a.name) == item.name)]
            if imp.names:
                keep.append(imp)
        else:
            keep.append(_copy(node))
    return ast.Module(body=keep, type_ignores=[])


def _copy(node: ast.stmt) -> ast.stmt:
    return copy.deepcopy(node)


def _rename(module: ast.Module, item: TestItem, new: str) -> None:
    if not item.imported:
        _target(module, item).name = new
        return
    for node in module.body:
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) == item.name:
                    alias.asname = new


def _target(module: ast.Module, item: TestItem) -> ast.FunctionDef | ast.AsyncFunctionDef:
    body = module.body
    if item.cls is not None:
        body = next(n for n in body if isinstance(n, ast.ClassDef) and n.name == item.cls).body
    return next(n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                and n.name == item.name)


def _runs(iterable: ast.expr) -> bool:
    if isinstance(iterable, (ast.List, ast.Tuple)):
        return bool(iterable.elts)
    if isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name) and \
            iterable.func.id == "range" and not iterable.keywords and 1 <= len(iterable.args) <= 3:
        try:
            return len(range(*(ast.literal_eval(a) for a in iterable.args))) > 0
        except (ValueError, TypeError):
            return False
    return False


def _fresh(rng: random.Random, used: set[str], pattern: str, title: bool = False) -> str:
    while True:
        a, b = rng.choice(_WORDS_A), rng.choice(_WORDS_B)
        name = pattern.format(a.title(), b.title()) if title else pattern.format(a, b)
        if name not in used:
            used.add(name)
            return name
        if len(used) > len(_WORDS_A) * len(_WORDS_B) // 2:  # crowded: widen the name space
            name = f"{name}_{rng.choice(_WORDS_B)}" if not title else f"{name}{rng.choice(_WORDS_B).title()}"
            if name not in used:
                used.add(name)
                return name


def _fresh_path(rng: random.Random, used: set[str], folder: str) -> str:
    names: set[str] = set()
    while True:
        stem = _fresh(rng, names, "test_{}_{}")
        path = f"{stem}.py" if folder in ("", ".") else f"{folder}/{stem}.py"
        if path not in used:
            used.add(path)
            return path


def _is_literal(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return isinstance(node.operand, ast.Constant) and isinstance(node.operand.value, (int, float))
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return all(_is_literal(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is not None and _is_literal(k) for k in node.keys) and \
            all(_is_literal(v) for v in node.values)
    return False


def _eq_sides(test: ast.expr) -> list[ast.expr]:
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
        return [test.left, test.comparators[0]]
    return []


def _is_expected(node: ast.expr) -> bool:
    """A literal, or a value built from literals only (``[date(2024, 1, 31)]``, ``Decimal("1.5")``)."""
    if _is_literal(node):
        return True
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return all(_is_expected(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is not None and _is_expected(k) for k in node.keys) and \
            all(_is_expected(v) for v in node.values)
    if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)):
        return bool(node.args or node.keywords) and all(_is_expected(a) for a in node.args) and \
            all(_is_expected(k.value) for k in node.keywords)
    return False


def _eq_literals(test: ast.expr) -> list[ast.expr]:
    sides = _eq_sides(test)
    if len(sides) != 2:
        return []
    for kind in (_is_literal, _is_expected):
        if kind(sides[0]) != kind(sides[1]):  # exactly one side is the expected value
            return [s for s in sides if kind(s)]
    # both built from constants (``f("a") == ["a"]`` with f a call): by convention the right side
    return [sides[1]] if _is_expected(sides[1]) else []


def _eq_names(test: ast.expr) -> list[ast.Name]:
    return [s for s in _eq_sides(test) if isinstance(s, ast.Name)]


def _mutate_literal(node: ast.expr, rng: random.Random) -> bool:
    """Change one leaf constant of a literal (a number, string, bytes or bool); the literal's
    value then differs from the original under ``==``."""
    leaves = [n for n in ast.walk(node) if isinstance(n, ast.Constant)
              and isinstance(n.value, (bool, int, float, str, bytes))]
    if isinstance(node, (ast.Set, ast.Dict)):  # a changed member may collide with another one
        leaves = [n for n in leaves if not isinstance(n.value, bool)]
    rng.shuffle(leaves)
    literal = _is_literal(node)
    for leaf in leaves:
        new = _mutate_value(leaf.value, rng)
        if new is not None:
            if not literal:  # built by calls: a changed argument is a changed value
                leaf.value = new
                return True
            before = ast.literal_eval(ast.unparse(node))
            old, leaf.value = leaf.value, new
            try:
                changed = ast.literal_eval(ast.unparse(node)) != before
            except ValueError:  # a negative value under a unary minus ("--2") is no literal
                changed = False
            if changed:
                return True
            leaf.value = old
    return False


def _mutate_value(value: object, rng: random.Random) -> object | None:
    """A changed value, drawn so that it is as likely above as below ``value``: the mutant's
    value alone does not say which of a pair is the real test (an always-larger mutant would let
    "return the smaller" pick the real one). The int deltas are half odd, half even, so the
    parity of a value says nothing either."""
    if isinstance(value, bool):
        return not value
    sign = rng.choice((-1, 1))
    if isinstance(value, int):
        return value + sign * rng.choice((1, 2, 3, 4))
    if isinstance(value, float):
        scale = abs(value) if value else 1.0
        return value + sign * scale * rng.choice((0.25, 0.5, 0.75))
    if isinstance(value, str):
        return _mutate_text(value, rng) or None
    if isinstance(value, bytes):
        text = _mutate_text(value.decode("latin-1"), rng)
        return text.encode("latin-1") if text else None
    return None


def _mutate_text(text: str, rng: random.Random) -> str:
    """One character replaced by another of the same kind, so the string still looks written."""
    if not text:
        return rng.choice(string.ascii_lowercase)
    i = rng.randrange(len(text))
    ch = text[i]
    pools = (string.ascii_lowercase, string.ascii_uppercase, string.digits)
    pool = next((p for p in pools if ch in p), string.ascii_lowercase + " ")
    choice = rng.choice([c for c in pool if c != ch])
    return text[:i] + choice + text[i + 1:]


def _negate(stmt: ast.Assert) -> None:
    test = stmt.test
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _NEGATE:
        test.ops = [_NEGATE[type(test.ops[0])]()]
    elif isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        stmt.test = test.operand
    else:
        stmt.test = ast.UnaryOp(op=ast.Not(), operand=test)
