"""Tamper detection by mutants: test items listed from source, mutated, renamed and shuffled.

Code under test shares a process with the test it is checked by, so anything that process reports
can be forged (a patched runner, an import hook that swaps test functions, results whose
``__eq__`` is always true, ``os._exit(0)``). A *mutant* is the same test with one expected value
changed; no code that computes a value passes both a test and its mutant. This catches forgery
that passes every test. Every grading lays out each test, real or mutant, alone in a freshly
named file with a freshly named function, in a random order; the mapping back to the real test
ids stays on the host, and a test process sees only its own file
(:mod:`proofgym.verify.sandboxed.runner`). A run in which a mutant passes together with its test
was tampered with.

Mutants are drawn to look like the task's real tests (``mutate_test`` lists the kinds in order):
a changed expected value is drawn from the values of the same kind that the task's test files
hold (visible and hidden) and, where the test's values allow one, keeps the real value's sign,
digit count, float repr length, string length and character classes (or is a whole input, or
made of input words), whether it occurs among the test's inputs, and the order and distinctness
of the list it sits in; no mutant negates an assert. Tests without an expected value to change
get a mutant of their own kind: ``pytest.raises`` tests a returning input (one another test
shows returning), a changed ``match=`` pattern or an unrelated builtin exception type; ``assert
f(...)`` the arguments of an opposite check of ``f``; helper-style tests (``check(candidate)``)
a changed expected value in the helper; and a test with none of these a changed copy of another
test's check, or of another whole test of its file, put first. A mutant built from what another
test shows (a returning input, another test's check) names that test in ``Layout.witnesses``:
its pass with its test means tampering only where that test passes too (wrong code that fails it
may pass both honestly). A test that none of these applies to has no mutant: :class:`Layout`
lists it in ``unmutable`` (and ``TestRun.unmutable``, the ``tests_without_mutant`` metric); a
test with a withheld check is guarded without one (``TestRun.guarded``), and a task none of whose
tests is guarded is a grader error (``CodeRepairTask.verify``). unittest checks count as asserts
(``self.assertEqual(a, b)`` and its equality kin, a project's own ``self.assert*(a, b)``, as
``assert a == b``; ``assertTrue``/``assertFalse`` as truth checks), and a parametrized test's
mutant changes one case's expected value. Every mutant
must fail where its test passes: a mutant that correct code passes would flag an honest solution
as tampering.

What holds, and its tests: every hidden test of every bundled CodeRepair task gets a mutant, none
negates a check, and every mutant fails with the reference fix while every test passes
(``tests/security/test_attack_mutant_classifier.py``); the red team's classifier
(``bench/mutant_classifier.py``: values absent from the inputs, negatives, long floats, negated
checks, impossible dates, unseen exception types, inserted checks) resolves the bundled tasks no
more often than a coin per pair, 2^-k for k mutated hidden tests (same file), and a guess from a
test's value alone does no better (``tests/security/test_attack_mutant_pairs.py``). Not
indistinguishable: an inserted check (the last resort) and a value no other value could replace
with the same relation to the inputs (a csv line whose only letter, ``x``, is also the expected
field) still tell a few pairs apart (see "Grading" in ``docs/threat-model.md``).

Where a hidden check compares with a literal, the grading withholds that literal from the test
process altogether (:mod:`proofgym.verify.sandboxed.withheld`: the host compares what the test
sent), so neither a test's nor its mutant's value can be read or judged there; mutants matter for
the checks that cannot be withheld (in an ``if`` without ``else``, helpers, against non-literal
values), ``pytest.raises`` and truth checks, and forged passes of everything else.

Tests are listed from the files' AST, never by importing them (importing runs the code under
test). Test functions are ``test*`` functions at module level (a parametrized one is one test:
its process runs all its cases) and the own ``test*`` methods of the classes pytest collects
(:func:`collected_classes`: ``Test*`` classes without ``__init__`` and any ``unittest.TestCase``
subclass, whatever its name).
"""

from __future__ import annotations

import ast
import builtins
import datetime
import decimal
import fractions
import functools
import hashlib
import itertools
import random
import re
import string
import threading
import unicodedata
import unittest
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import TypeVar

from proofgym.core.errors import TestSourceError as TestSourceError

_T = TypeVar("_T")

_WORDS_A = ("basic", "edge", "empty", "nested", "unicode", "large", "mixed", "repeated", "single",
            "quoted", "invalid", "default", "reversed", "boundary", "sorted", "missing", "extra",
            "long", "short", "simple", "plain", "odd", "even", "first", "last", "many", "zero")
_WORDS_B = ("case", "input", "values", "order", "items", "keys", "range", "fields", "format",
            "limits", "errors", "paths", "names", "rows", "parse", "roundtrip", "spacing",
            "result", "output", "lookup", "update", "split", "merge", "count", "state", "text")

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


def list_tests(path: str, source: bytes | str) -> list[TestItem]:
    """The test items of one test file, from its AST (nothing is imported or run)."""
    with _AST_LOCK:
        return _list_tests(path, source)


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
    #: generated ids of parametrized tests (real and mutant): their process runs every case,
    #: so pytest collects several items there (one elsewhere)
    several: list[str] = field(default_factory=list)
    #: generated mutant id -> real test ids that must pass too for "mutant and test passed" to
    #: mean tampering (a mutant built from what another test shows: a returning input, another
    #: test's check); wrong code that fails those may pass the mutant and its test honestly
    witnesses: dict[str, list[str]] = field(default_factory=dict)


def build_layout(sources: Mapping[str, bytes], wanted: Iterable[str], *,
                 taken: Iterable[str] = (), rng: random.Random | None = None,
                 with_mutants: bool = True, mutate_files: Iterable[str] | None = None,
                 mutant_seed: bytes | None = None) -> Layout:
    """Lay out the ``wanted`` test ids (``file::[Class::]name``, files in ``sources``) and one
    mutant of each (where one can be built) as freshly named single-test files, shuffled.

    ``taken`` are workspace paths the generated files must not use; ``mutate_files`` limits
    mutants to the tests of those files (by default all). With ``mutant_seed`` each test's
    mutant is drawn from a generator seeded by it and the test's id (and source), so every
    grading of a task has the same mutants (only names and order are new): a grading whose
    tests leak (a channel between sandboxes) shows the same unlabelled pair every time, never a
    real value that recurs among changing mutants. Raises :class:`TestSourceError` for a wanted
    id that its file does not define.
    """
    with _AST_LOCK:
        return _build_layout(sources, wanted, taken=taken, rng=rng, with_mutants=with_mutants,
                             mutate_files=mutate_files, mutant_seed=mutant_seed)


def _mutant_rng(seed: bytes, node_id: str, source: bytes) -> random.Random:
    digest = hashlib.sha256(seed + b"\0" + node_id.encode() + b"\0" + source).digest()
    return random.Random(int.from_bytes(digest, "big"))


def _build_layout(sources: Mapping[str, bytes], wanted: Iterable[str], *,
                  taken: Iterable[str] = (), rng: random.Random | None = None,
                  with_mutants: bool = True, mutate_files: Iterable[str] | None = None,
                  mutant_seed: bytes | None = None) -> Layout:
    """The implementation of :func:`build_layout` (called with the AST lock held)."""
    rng = rng or random.SystemRandom()
    wanted = list(dict.fromkeys(wanted))
    layout = Layout()
    if mutant_seed is None:
        tests = _tests_and_mutants(sources, wanted, rng, with_mutants, mutate_files, None)
    else:  # the same every time for these inputs: built once per process, copied per grading
        key = hashlib.sha256(repr((sorted((p, bytes(c)) for p, c in sources.items()), wanted,
                                   with_mutants, None if mutate_files is None else sorted(mutate_files),
                                   mutant_seed)).encode()).digest()
        if key not in _BUILT:
            if len(_BUILT) >= _BUILT_MAX:
                _BUILT.pop(next(iter(_BUILT)))
            _BUILT[key] = _tests_and_mutants(sources, wanted, rng, with_mutants, mutate_files,
                                             mutant_seed)
        tests = _BUILT[key]
    entries, layout.unmutable = [(i, _clone(m), of, w) for i, m, of, w in tests[0]], list(tests[1])
    used_paths = set(taken) | set(sources)
    used_names: set[str] = set()
    rng.shuffle(entries)
    for item, module, mutant_of, witnesses in entries:
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
        if item.parametrized:
            layout.several.append(gen_id)
        if mutant_of is None:
            layout.real[gen_id] = item.node_id
        else:
            layout.mutant[gen_id] = mutant_of
            if witnesses:
                layout.witnesses[gen_id] = list(witnesses)
    return layout


#: The tests and mutants of recent layouts with a ``mutant_seed`` (see :func:`_tests_and_mutants`),
#: by a digest of their inputs: a task graded again in this process parses nothing again.
_BUILT: dict[bytes, tuple[list[tuple[TestItem, ast.Module, str | None, list[str]]], list[str]]] = {}
_BUILT_MAX = 64


def _tests_and_mutants(sources: Mapping[str, bytes], wanted: list[str], rng: random.Random,
                       with_mutants: bool, mutate_files: Iterable[str] | None,
                       mutant_seed: bytes | None,
                       ) -> tuple[list[tuple[TestItem, ast.Module, str | None, list[str]]], list[str]]:
    """Each wanted test as a module of its own, and its mutant where one can be built, as
    (item, module, id it is a mutant of or None, witnesses), in ``wanted`` order; and the
    ids no mutant could be built for. With ``mutant_seed`` the result depends on the arguments
    alone; without, the mutants are drawn from ``rng``."""
    mutate = set(sources if mutate_files is None else mutate_files)
    trees = {path: _parse(path, src) for path, src in sources.items()}
    pool = build_pool(trees, preferred=mutate, passing=wanted)
    listed = {item.node_id: item for path, src in sources.items() for item in list_tests(path, src)}
    missing = [w for w in wanted if w not in listed]
    if missing:
        raise TestSourceError(f"test ids not defined in their files (checked from the source): {missing}")
    entries: list[tuple[TestItem, ast.Module, str | None, list[str]]] = []
    unmutable: list[str] = []
    for node_id in wanted:
        item = listed[node_id]
        entries.append((item, _isolate(trees[item.file], item), None, []))
        if with_mutants and not item.imported and item.file in mutate:
            mutated = _isolate(trees[item.file], item)
            witnesses: list[str] = []
            values = rng if mutant_seed is None else _mutant_rng(
                mutant_seed, node_id, bytes(sources[item.file]))
            if mutate_test(_target(mutated, item), values, mutated, pool, item.file, witnesses):
                entries.append((item, mutated, node_id, witnesses))
            else:
                unmutable.append(node_id)
    return entries, unmutable


def mutate_test(func: ast.FunctionDef | ast.AsyncFunctionDef, rng: random.Random,
                module: ast.Module | None = None, pool: MutationPool | None = None,
                file: str | None = None, witnesses: list[str] | None = None) -> bool:
    """Change ``func`` (and, for a helper-style test, the helper it calls, in ``module``) in place
    so that code computing the right values must fail it where the original passes; False when
    no such mutation is known. No mutation negates an assert.

    ``pool`` describes the task's tests (:func:`build_pool`; by default ``module`` alone):
    replacement values are drawn from the values of the same kind seen there. In order of
    preference:

    1. an expected value: one leaf of the expected side of an ``==`` (or the prefix of a
       ``startswith``) in an assert that runs unconditionally (in the test, in a loop over a
       non-empty literal, or in a same-file helper the test calls), or of a literal assigned to a
       name only that comparison reads. The new leaf keeps the old one's kind, sign, digit
       count, float repr length, string length and per-character classes, whether it occurs in
       the test's inputs, and the order and distinctness of the container it sits in;
    2. for ``pytest.raises`` tests: the raising call's literal inputs replaced by those of the
       same call that another test shows returning (so it no longer raises), or the ``match=``
       pattern changed in every alternative, or (a builtin exception only) the type swapped for
       an unrelated builtin one; for ``assert f(...)`` / ``assert not f(...)`` the arguments of
       an opposite-polarity check of the same function;
    3. the same kind of leaf change with fewer of its properties kept;
    4. put first: a changed copy of another test's ``assert <pure call> == <expected>`` (same
       file first, then other preferred files, then any whose names this file has), else of a
       whole other test of the same file (one without fixtures).

    Only checks that surely run are changed (not after an early ``return``), and only graded
    tests without fixtures or decorators vouch for a call returning (:func:`build_pool`).
    """
    with _AST_LOCK:
        if pool is None:
            pool = build_pool({file or "<test>": module or ast.Module(body=[func], type_ignores=[])})
        mutator = _Mutator(func, module, pool, rng, file)
        done = mutator.run()
        if done and witnesses is not None:
            witnesses += dict.fromkeys(mutator.witnesses)
        return done


# ------------------------------------------------------------------------------ the pool
_RAISES = ("raises",)
_EXC_SWAPS = ("ValueError", "TypeError", "KeyError", "IndexError", "RuntimeError",
              "AttributeError", "ZeroDivisionError", "OverflowError", "LookupError",
              "NotImplementedError", "OSError", "UnicodeError")


@dataclass
class MutationPool:
    """What a task's tests look like, for drawing mutants that look like them.

    ``expected``: every leaf value of an expected side (the distribution replacement values are
    drawn from); ``valid``: pure calls (imported functions of literals) that some test runs
    outside ``pytest.raises``, so they return; ``checks``: ``(call, truthy)`` of
    ``assert f(...)`` / ``assert not f(...)``; ``borrow``: per file, ``assert f(<literals>) ==
    <literal>`` statements with their test's name; ``exceptions``: exception names the tests
    expect. Entries from the preferred (hidden) files come first.
    """

    expected: list[object] = field(default_factory=list)
    valid: list[tuple[str, ast.expr]] = field(default_factory=list)
    preferred_valid: int = 0  # how many of ``valid`` come from preferred files
    #: id of an entry of ``valid``, ``checks``, ``borrow`` or ``bodies`` -> the test it is from
    source: dict[int, str] = field(default_factory=dict)
    checks: list[tuple[str, ast.expr, bool]] = field(default_factory=list)
    borrow: dict[str, list[tuple[str, ast.Assert]]] = field(default_factory=dict)
    exceptions: list[str] = field(default_factory=list)
    preferred: set[str] = field(default_factory=set)
    #: per file, its module-level tests that take no fixtures and have no decorators
    bodies: dict[str, list[tuple[str, ast.FunctionDef]]] = field(default_factory=dict)


def build_pool(trees: Mapping[str, ast.Module | bytes | str],
               preferred: Iterable[str] = (), passing: Iterable[str] | None = None) -> MutationPool:
    """The :class:`MutationPool` of a task's test files (path -> AST or source); ``preferred``
    files' calls are tried first (the hidden ones: the code under test has not seen them).

    What a mutant may take as known to return or hold (``valid``, ``checks``, ``borrow``,
    ``bodies``) comes only from tests in ``passing`` (node ids; by default every test), and of
    those only from ones without fixtures or decorators (a skipped test or a monkeypatched one
    shows nothing): correct code passes the tests it is graded on."""
    with _AST_LOCK:
        preferred = set(preferred)
        passing = None if passing is None else set(passing)
        pool = MutationPool(preferred=preferred)
        order = sorted(trees, key=lambda p: p not in preferred)
        late: list[tuple[str, ast.expr]] = []
        late_checks: list[tuple[str, ast.expr, bool]] = []
        for path in order:
            tree = trees[path]
            if not isinstance(tree, ast.Module):
                tree = _parse(path, tree)
            imported = _imported(tree)
            helpers = [("", n) for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                       and not n.name.startswith("test")]
            for name, func in [*_test_functions(tree), *helpers]:
                env = _pure_env(func.body, imported)
                trusted = bool(name) and _plain(func) and (passing is None or f"{path}::{name}" in passing)
                for stmt, _ in _running(func.body, tree):
                    _collect(stmt, imported, env, pool, path, name,
                             pool.valid if path in preferred else late,
                             pool.checks if path in preferred else late_checks, trusted)
            pool.bodies[path] = [(n.name, _clone(n)) for n in tree.body
                                 if isinstance(n, ast.FunctionDef) and n.name.startswith("test")
                                 and _plain(n) and (passing is None or f"{path}::{n.name}" in passing)]
            pool.source.update({id(f): f"{path}::{name}" for name, f in pool.bodies[path]})
            for node in ast.walk(tree):
                exc = _raises_type(node)
                if exc is not None:
                    pool.exceptions.append(exc)
        pool.preferred_valid = len(pool.valid)
        pool.valid += late
        pool.checks += late_checks
        return pool


def _plain(func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A test without decorators and without parameters (fixtures) other than ``self``."""
    args = func.args
    params = [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]]
    return not func.decorator_list and params in ([], ["self"]) and args.vararg is None and \
        args.kwarg is None and isinstance(func, ast.FunctionDef)


def _collect(stmt: ast.stmt, imported: set[str], env: dict[str, ast.expr], pool: MutationPool,
             path: str, name: str, valid: list, checks: list, trusted: bool = True) -> None:
    """Record one running statement of a test: its expected values, and (``trusted``: a test
    that passes with correct code) the pure calls it surely evaluates (so they returned), its
    truth checks and borrowable asserts."""
    stmt = _as_assert(stmt) or stmt  # ``self.assertEqual(a, b)`` checks as ``assert a == b``
    if not trusted:
        if isinstance(stmt, ast.Assert):
            for side in _eq_literals(stmt.test):
                pool.expected += [v for v, _ in _leaf_values(side)]
        return
    evaluated: list[ast.expr] = []
    if isinstance(stmt, (ast.Assign, ast.Expr)):
        evaluated.append(stmt.value)
    elif isinstance(stmt, ast.Assert):
        test = stmt.test
        if isinstance(test, ast.Compare) and len(test.ops) == 1:  # a chain may stop early
            evaluated += [test.left, *test.comparators]
        negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
        call = test.operand if negated else test
        if isinstance(call, ast.Call):
            evaluated.append(call)
            view = _view(call, imported, env)
            if view is not None and _constants(view):
                checks.append((_skeleton(view), _clone(view), not negated))
                pool.source[id(checks[-1][1])] = f"{path}::{name}"
        for side in _eq_literals(test):
            pool.expected += [v for v, _ in _leaf_values(side)]
        sides = _eq_sides(test)
        left = _view(sides[0], imported, env) if len(sides) == 2 else None
        if left is not None and _eq_literals(test) == [sides[1]] and \
                isinstance(left, (ast.Call, ast.Attribute, ast.Subscript)):
            check = ast.Assert(test=ast.Compare(left=_clone(left), ops=[ast.Eq()],
                                                comparators=[_clone(sides[1])]), msg=None)
            pool.borrow.setdefault(path, []).append((name, check))
            pool.source[id(check)] = f"{path}::{name}"
    for expr in evaluated:
        view = _view(expr, imported, env)
        if view is None:
            continue
        for sub in ast.walk(view):  # a pure call's arguments are evaluated before it
            if isinstance(sub, ast.Call) and _constants(sub):
                valid.append((_skeleton(sub), _clone(sub)))
                pool.source[id(valid[-1][1])] = f"{path}::{name}"


def _constants(node: ast.AST) -> list[ast.Constant]:
    return [n for n in ast.walk(node) if isinstance(n, ast.Constant)]


def _imported(tree: ast.Module) -> set[str]:
    """Names bound by the module's imports and function definitions (``pytest`` excluded)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module != "pytest":
            names |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.Import):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names} - {"pytest"}
    return names


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


def _pure_env(body: list[ast.stmt], imported: set[str]) -> dict[str, ast.expr]:
    """Names assigned exactly once, at the top of ``body``, to a pure value and only read in
    ways that cannot change what they hold (as arguments of imported functions, compared, or
    attributes read; never a method called on them, an item or attribute set, or a local
    function given them): name -> the assigned node itself (so a leaf changed through a view
    changes the test). A view of ``cache.evictions`` after ``cache.put(...)`` would be wrong."""
    counts: dict[str, int] = {}
    parents: dict[int, ast.AST] = {}
    for node in body:
        for sub in ast.walk(node):
            for child in ast.iter_child_nodes(sub):
                parents[id(child)] = sub
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                counts[sub.id] = counts.get(sub.id, 0) + 1
    unsafe = {sub.id for node in body for sub in ast.walk(node)
              if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load)
              and not _harmless_read(sub, parents, imported)}
    env: dict[str, ast.expr] = {}
    for node in body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name) and counts.get(node.targets[0].id) == 1 and \
                node.targets[0].id not in unsafe and _view(node.value, imported, env) is not None:
            env[node.targets[0].id] = node.value
    return env


def _harmless_read(name: ast.Name, parents: Mapping[int, ast.AST], imported: set[str]) -> bool:
    parent = parents.get(id(name))
    if isinstance(parent, ast.keyword):
        parent = parents.get(id(parent))
        return isinstance(parent, ast.Call) and _callee_ok(parent.func, imported)
    if isinstance(parent, ast.Call):
        return name is not parent.func and _callee_ok(parent.func, imported)
    if isinstance(parent, ast.Compare):
        return True
    if isinstance(parent, (ast.Attribute, ast.Subscript)) and parent.value is name:
        above = parents.get(id(parent))
        return isinstance(parent.ctx, ast.Load) and not (isinstance(above, ast.Call) and above.func is parent)
    return False


def _view(node: ast.expr, imported: set[str], env: Mapping[str, ast.expr]) -> ast.expr | None:
    """``node`` with the names of ``env`` replaced by their values, sharing the leaves with the
    test (a new node only where a name was replaced above it), or None when it is not a pure
    value: literals, calls of imported names (or their attributes, or methods of a pure value)
    on pure values, and attributes or items of pure values."""
    if isinstance(node, ast.Constant):
        return node
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        operand = _view(node.operand, imported, env)
        return None if operand is None else (node if operand is node.operand else
                                             ast.UnaryOp(op=node.op, operand=operand))
    if isinstance(node, ast.Name):
        if node.id in env:
            return _view(env[node.id], imported, {k: v for k, v in env.items() if k != node.id})
        return None
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        elts = [_view(e, imported, env) for e in node.elts]
        if any(e is None for e in elts):
            return None
        if all(a is b for a, b in zip(elts, node.elts, strict=True)):
            return node
        return ast.Set(elts=elts) if isinstance(node, ast.Set) else type(node)(elts=elts, ctx=ast.Load())
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            return None
        keys = [_view(k, imported, env) for k in node.keys]  # type: ignore[arg-type]
        values = [_view(v, imported, env) for v in node.values]
        if any(x is None for x in [*keys, *values]):
            return None
        return ast.Dict(keys=keys, values=values)
    if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
        value = _view(node.value, imported, env)
        if value is None or not isinstance(value, (ast.Call, ast.Attribute, ast.Subscript)):
            return None  # an attribute of a call's result, not of a module
        return ast.Attribute(value=value, attr=node.attr, ctx=ast.Load())
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and \
            isinstance(node.slice, ast.Constant):
        value = _view(node.value, imported, env)
        return None if value is None else ast.Subscript(value=value, slice=node.slice, ctx=ast.Load())
    if isinstance(node, ast.Call) and not any(isinstance(a, ast.Starred) for a in node.args) and \
            all(k.arg is not None for k in node.keywords):
        if _callee_ok(node.func, imported):
            func = node.func
        elif isinstance(node.func, ast.Attribute):  # a method of a pure value
            inner = _view(node.func.value, imported, env)
            if inner is None or not isinstance(inner, (ast.Call, ast.Attribute, ast.Subscript)):
                return None
            func = ast.Attribute(value=inner, attr=node.func.attr, ctx=ast.Load())
        else:
            return None
        args = [_view(a, imported, env) for a in node.args]
        kws = [_view(k.value, imported, env) for k in node.keywords]
        if any(x is None for x in [*args, *kws]):
            return None
        return ast.Call(func=func, args=args,
                        keywords=[ast.keyword(arg=k.arg, value=v)
                                  for k, v in zip(node.keywords, kws, strict=True)])
    return None


def _callee_ok(func: ast.expr, imported: set[str]) -> bool:
    """An imported function or class, or an attribute of one (``Version.parse``)."""
    while isinstance(func, ast.Attribute):
        func = func.value
    return isinstance(func, ast.Name) and func.id in imported


def _skeleton(node: ast.expr) -> str:
    """The expression with each constant reduced to its type: calls with the same skeleton
    differ in their literal inputs only."""
    blank = _clone(node)
    for sub in ast.walk(blank):
        if isinstance(sub, ast.Constant):
            sub.value = type(sub.value).__name__
    return ast.dump(blank, annotate_fields=False, include_attributes=False)


def _raises_type(node: ast.AST) -> str | None:
    call = _raises_call(node) if isinstance(node, ast.withitem) else None
    if call is not None and call.args and isinstance(call.args[0], ast.Name):
        return call.args[0].id
    return None


def _raises_call(item: ast.withitem) -> ast.Call | None:
    call = item.context_expr
    if isinstance(call, ast.Call):
        func = call.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if name in _RAISES:
            return call
    return None


def _running(body: list[ast.stmt], module: ast.Module | None,
             loops: tuple[tuple[str, ast.expr], ...] = ()
             ) -> Iterator[tuple[ast.stmt, tuple[tuple[str, ast.expr], ...]]]:
    """The statements of ``body`` that run whenever it does, with the loops they are in (loop
    variable, the literal iterated over): direct statements, and those of loops over a non-empty
    literal or ``range`` (or a name bound to a non-empty literal at the top of the module)."""
    for stmt in body:
        if _may_leave(stmt):  # ``if x: return`` (or ``break``): what follows may not run
            return
        yield stmt, loops
        if isinstance(stmt, ast.For) and not stmt.orelse:
            source = _loop_source(stmt.iter, module)
            if source is not None:
                inner = loops
                if isinstance(stmt.target, ast.Name) and isinstance(source, (ast.List, ast.Tuple)):
                    inner = (*loops, (stmt.target.id, source))
                yield from _running(stmt.body, module, inner)


def _may_leave(stmt: ast.stmt) -> bool:
    """Whether ``stmt`` can end its function or loop early (a ``return``, ``yield``, ``break``
    or ``continue`` in it, outside nested functions and classes)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return False  # defining a function runs none of it
    todo: list[ast.AST] = [stmt]
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Return, ast.Yield, ast.YieldFrom, ast.Break, ast.Continue)):
            return True
        todo += [c for c in ast.iter_child_nodes(node) if not isinstance(
            c, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef))]
    return False


def _loop_source(iterable: ast.expr, module: ast.Module | None) -> ast.expr | None:
    if isinstance(iterable, ast.Name) and module is not None:
        name = iterable.id  # (the last top-level assignment of the name wins, as at run time)
        for node in module.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                    isinstance(node.targets[0], ast.Name) and node.targets[0].id == name:
                iterable = node.value
    if isinstance(iterable, (ast.List, ast.Tuple)) and iterable.elts:
        return iterable
    if isinstance(iterable, ast.Constant) and isinstance(iterable.value, str) and iterable.value:
        return iterable
    return iterable if _runs(iterable) else None


# ------------------------------------------------------------------------------ the mutator
_Feature = tuple[object, ...]


class _Mutator:
    """One test's mutation: finds its checks, inputs and expected values, then tries the
    mutations of :func:`mutate_test` in order."""

    def __init__(self, func: ast.FunctionDef | ast.AsyncFunctionDef, module: ast.Module | None,
                 pool: MutationPool, rng: random.Random, file: str | None) -> None:
        self.func, self.module, self.pool, self.rng, self.file = func, module, pool, rng, file
        #: other tests whose pass the mutant relies on (a mutant built from what another test
        #: shows holds only where that test passes too: wrong code may pass both otherwise)
        self.witnesses: list[str] = []
        self.imported = _imported(module) if module is not None else set()
        scope = module.body if module is not None else []
        # names of fixed values an expected side may hold: imported ones, module constants
        self.constants = self.imported | {t.id for n in scope if isinstance(n, ast.Assign)
                                          for t in n.targets if isinstance(t, ast.Name)}
        helpers = {n.name: n for n in scope if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                   and not n.name.startswith("test")}
        self.bodies: list[list[ast.stmt]] = [func.body]
        for stmt in func.body:  # a helper-style test: the checks live in a helper it calls
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and \
                    isinstance(stmt.value.func, ast.Name) and stmt.value.func.id in helpers:
                helper = helpers[stmt.value.func.id]
                if helper.body not in self.bodies:
                    self.bodies.append(helper.body)
        self.running = [(s, loops) for body in self.bodies for s, loops in _running(body, module)]
        self.asserts = [a for s, _ in self.running if (a := _as_assert(s)) is not None]
        self.env = _pure_env(func.body, self.imported)
        # expected sides: literal sides of == (and startswith prefixes), and literals assigned to
        # a name only such a comparison reads (one that is also an input would change both sides)
        self.expected: list[ast.expr] = []
        for a in self.asserts:
            self.expected += _eq_literals(a.test, self.constants)
            self.expected += _prefix_literals(a.test)
        self.expected += _case_expected(func, self.asserts)
        compared = {n.id for a in self.asserts for n in _eq_names(a.test)}
        loads = [n.id for n in ast.walk(module if module is not None else func)
                 if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]
        expected_only = {name for name in compared if loads.count(name) == 1}
        self.assigned = [s.value for body in [*self.bodies, scope] for s in body
                         if isinstance(s, ast.Assign) and len(s.targets) == 1
                         and isinstance(s.targets[0], ast.Name)
                         and s.targets[0].id in expected_only and _is_literal(s.value)]
        expected_ids = {id(n) for root in [*self.expected, *self.assigned] for n in ast.walk(root)}
        # inputs: every other literal of the test (and of the module constants it reads)
        read = {n.id for body in self.bodies for s in body for n in ast.walk(s)
                if isinstance(n, ast.Name)}
        far_roots: list[ast.AST] = [s for body in self.bodies for s in body]
        far_roots += [s.value for s in scope if isinstance(s, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id in read for t in s.targets)]
        self.far = _Inputs([n for root in far_roots for n in ast.walk(root)
                            if isinstance(n, ast.Constant) and id(n) not in expected_ids])
        self.near: dict[int, _Inputs] = {}
        for a in self.asserts:
            sides = _eq_sides(a.test)
            for side in [*_eq_literals(a.test, self.constants), *_prefix_literals(a.test)]:
                others = [s for s in (sides or [a.test]) if s is not side]
                names = {n.id for o in others for n in ast.walk(o) if isinstance(n, ast.Name)}
                roots: list[ast.AST] = [*others, *(s.value for body in self.bodies for s in body
                                                   if isinstance(s, ast.Assign) and any(
                                                       isinstance(t, ast.Name) and t.id in names
                                                       for t in s.targets))]
                self.near[id(side)] = _Inputs([n for r in roots for n in ast.walk(r)
                                               if isinstance(n, ast.Constant)
                                               and id(n) not in expected_ids])
        self.chars = "".join(n.value for s in far_roots for n in ast.walk(s)
                             if isinstance(n, ast.Constant) and isinstance(n.value, str))

    # ------------------------------------------------------------------ driver
    def run(self) -> bool:
        return self._expected_values(close=True) or self._other_checks() or \
            self._expected_values(close=False) or self._borrow()

    def _expected_values(self, close: bool) -> bool:
        """``close``: every property of the changed value kept (its relation to all the test's
        inputs, then to its own comparison's), or two items of an expected list swapped (the
        same values), then without the container's order and distinctness. Else: any swap, then
        a value of the same form only."""
        roots = [*self.expected, *self.assigned]
        if close:
            return self._mutate_values(roots, 2) or self._swap_items(roots) or \
                self._mutate_values(roots, 1) or self._mutate_values(roots, 2, keep_shape=False) or \
                self._mutate_values(roots, 1, keep_shape=False)
        return self._swap_items(roots, keep_shape=False) or self._mutate_values(roots, 0) or \
            self._mutate_values(roots, 0, keep_shape=False)

    def _other_checks(self) -> bool:
        # (swapping the operands of ``a < b`` is no mutant: a wrong ``__lt__`` passes both)
        other = self._raises() or self._checks()
        if other:
            self.rng.choice(other)()
        return bool(other)

    # ------------------------------------------------------------------ expected values
    def _mutate_values(self, roots: list[ast.expr], level: int, keep_shape: bool = True) -> bool:
        sites: list[tuple[int, ast.expr, ast.Constant, bool]] = []
        for root in roots:
            parents = {id(c): p for p in ast.walk(root) for c in ast.iter_child_nodes(p)}
            keys = {id(k) for n in ast.walk(root) if isinstance(n, ast.Dict) for k in n.keys if k}
            for leaf in ast.walk(root):
                if isinstance(leaf, ast.Constant) and isinstance(leaf.value, (bool, int, float, str, bytes)):
                    negative = isinstance(parents.get(id(leaf)), ast.UnaryOp) and \
                        isinstance(parents[id(leaf)].op, ast.USub)
                    rank = 2 if isinstance(leaf.value, bool) else 1 if id(leaf) in keys else 0
                    sites.append((rank, root, leaf, negative))
        self.rng.shuffle(sites)
        sites.sort(key=lambda s: s[0])  # values first, then dict keys, then booleans
        return any(self._mutate_leaf(root, leaf, negative, level, keep_shape)
                   for _, root, leaf, negative in sites)

    def _swap_items(self, roots: list[ast.expr], keep_shape: bool = True) -> bool:
        """Two different items of an expected list or tuple swapped: every value stays one the
        test had, and a sequence compares item by item, so the expected value changed."""
        options = []
        for root in roots:
            for node in ast.walk(root):
                if isinstance(node, (ast.List, ast.Tuple)):
                    dumps = [ast.dump(e) for e in node.elts]
                    kinds = [_skeleton(e) for e in node.elts]  # an int and a list never swap
                    options += [(root, node, i, j) for i in range(len(dumps))
                                for j in range(i + 1, len(dumps))
                                if dumps[i] != dumps[j] and kinds[i] == kinds[j]
                                and not (_key(node.elts[i]) is not _NO_KEY
                                         and _key(node.elts[i]) == _key(node.elts[j]))]
        self.rng.shuffle(options)
        for root, node, i, j in options:
            shape = _shape_signature(root)
            node.elts[i], node.elts[j] = node.elts[j], node.elts[i]
            if not keep_shape or _shape_signature(root) == shape:
                return True
            node.elts[i], node.elts[j] = node.elts[j], node.elts[i]
        return False

    def _mutate_leaf(self, root: ast.expr, leaf: ast.Constant, negative: bool, level: int,
                     keep_shape: bool = True) -> bool:
        old = leaf.value
        value = -old if negative and not isinstance(old, (str, bytes)) else old  # type: ignore[operator]
        near = self.near.get(id(root), self.far)
        literal = _is_literal(root)
        before = ast.literal_eval(ast.unparse(root)) if literal else None
        shape = _shape_signature(root)
        # the leaf alone, else with its twins (``["svc", "svc"]`` stays a pair of equal items)
        siblings = next((list(p.elts if isinstance(p, (ast.List, ast.Tuple, ast.Set)) else p.args)
                         for p in ast.walk(root) if isinstance(p, (ast.List, ast.Tuple, ast.Set, ast.Call))
                         and any(e is leaf for e in (p.elts if not isinstance(p, ast.Call) else p.args))),
                        [])
        twins = [e for e in siblings if e is not leaf and isinstance(e, ast.Constant)
                 and type(e.value) is type(old) and e.value == old and not negative]
        made = _stdlib_values(root, [leaf, *twins])  # Fraction(1, 2) == Fraction(2, 4)
        for group in ([leaf], [leaf, *twins]) if twins else ([leaf],):
            # a string a call turns into a value (``Decimal("0.16")``) changes in place only:
            # ``Decimal("00.16")`` would be the same value
            in_call = any(isinstance(n, ast.Call) and any(
                a is leaf for a in [*n.args, *(k.value for k in n.keywords)]) for n in ast.walk(root))
            for new in _candidates(value, near, self.far, self.pool, self.chars, self.rng, level,
                                   loose=not in_call):
                for n in group:
                    n.value = -new if negative and not isinstance(new, (str, bytes)) else new  # type: ignore[operator]
                try:
                    changed = not literal or ast.literal_eval(ast.unparse(root)) != before
                except ValueError:  # a negative value under a unary minus ("--2") is no literal
                    changed = False
                if changed and (not keep_shape or _shape_signature(root) == shape) and \
                        _constructible(root) and (not made or _stdlib_values(root, group) != made):
                    return True
                for n in group:
                    n.value = old
        return False

    # ------------------------------------------------------------------ raises tests
    def _raises(self) -> list[Callable[[], None]]:
        inputs: list[Callable[[], None]] = []
        patterns: list[Callable[[], None]] = []
        swaps: list[Callable[[], None]] = []
        for stmt, loops in self.running:
            if not isinstance(stmt, (ast.With, ast.AsyncWith)):
                continue
            for item in stmt.items:
                call = _raises_call(item)
                if call is None:
                    continue
                if len(stmt.body) == 1 and isinstance(stmt.body[0], (ast.Expr, ast.Assign)):
                    option = self._valid_input(stmt.body[0].value, loops)
                    if option is not None:
                        inputs.append(option)
                for kw in call.keywords:
                    if kw.arg == "match" and isinstance(kw.value, ast.Constant) and \
                            isinstance(kw.value.value, str):
                        new = _mutate_pattern(kw.value.value, self.chars, self.rng)
                        if new is not None:
                            patterns.append(functools.partial(setattr, kw.value, "value", new))
                swap = self._swap_exception(call)
                if swap is not None:
                    swaps.append(swap)
        return inputs + patterns or swaps

    def _valid_input(self, call: ast.expr, loops: tuple[tuple[str, ast.expr], ...]
                     ) -> Callable[[], None] | None:
        """The raising call's literals replaced by those of the same call where a test shows it
        returning: a pure call that returned there returns here, so ``pytest.raises`` fails."""
        env = dict(self.env)
        for name, source in loops:
            if isinstance(source, (ast.List, ast.Tuple)):
                env[name] = self.rng.choice(source.elts)
        view = _view(call, self.imported, env)
        if view is None:
            return None
        leaves = [n for n in ast.walk(view) if isinstance(n, ast.Constant)]
        skeleton = _skeleton(view)
        mine = [n.value for n in leaves]
        choices: list[tuple[int, list[object], ast.expr]] = []
        for i, (other_skeleton, other) in enumerate(self.pool.valid):
            if other_skeleton != skeleton:
                continue
            values = [n.value for n in _constants(other)]
            target: dict[int, object] = {}
            if values == mine or any(target.setdefault(id(leaf), v) != v
                                     for leaf, v in zip(leaves, values, strict=True)):
                continue  # the same call, or one leaf asked to take two values
            # rank: from a hidden file (unseen by the code under test), then shaped alike
            alike = all(_features(a, self.far, self.far, 0) == _features(b, self.far, self.far, 0)
                        for a, b in zip(mine, values, strict=True))
            choices.append(((i >= self.pool.preferred_valid) * 2 + (not alike), values, other))
        if not choices:
            return None
        best = min(rank for rank, _, _ in choices)
        values, other = self.rng.choice([(v, o) for rank, v, o in choices if rank == best])

        def apply() -> None:
            for leaf, v in zip(leaves, values, strict=True):
                leaf.value = v
            self.witnesses.append(self.pool.source[id(other)])
        return apply

    def _swap_exception(self, call: ast.Call) -> Callable[[], None] | None:
        """A builtin exception type swapped for an unrelated builtin one: what correct code
        raises (the type or a subclass) is then not what the mutant expects."""
        if not call.args or not isinstance(call.args[0], ast.Name):
            return None
        old = _builtin_exception(call.args[0].id)
        if old is None:
            return None
        # a type the task's tests expect elsewhere, when there is one: an unusual type says
        # "mutant" to code that knows the visible tests
        seen = [e for e in self.pool.exceptions if _unrelated(old, _builtin_exception(e))]
        options = seen or [e for e in _EXC_SWAPS if _unrelated(old, _builtin_exception(e))]
        if not options:
            return None
        new = self.rng.choice(options)
        return functools.partial(setattr, call.args[0], "id", new)

    # ------------------------------------------------------------------ checks and orderings
    def _checks(self) -> list[Callable[[], None]]:
        """``assert f(...)`` / ``assert not f(...)``: the arguments of a check of the same
        function with the opposite outcome (both lines exchanged when the test has both)."""
        mine = []
        for a in self.asserts:
            negated = isinstance(a.test, ast.UnaryOp) and isinstance(a.test.op, ast.Not)
            call = a.test.operand if negated else a.test
            if isinstance(call, ast.Call):
                view = _view(call, self.imported, self.env)
                if view is not None:
                    mine.append((_skeleton(view), view, not negated))
        options: list[Callable[[], None]] = []
        for skel, view, truthy in mine:
            partners = [v for s, v, t in mine if s == skel and t != truthy]
            if partners:
                options.append(functools.partial(_exchange, view, self.rng.choice(partners)))
                continue
            own = [n.value for n in _constants(view)]
            others = [v for s, v, t in self.pool.checks if s == skel and t != truthy
                      and [n.value for n in _constants(v)] != own]
            if others:
                options.append(functools.partial(self._copy_check, view, self.rng.choice(others)))
        return options

    def _copy_check(self, view: ast.expr, other: ast.expr) -> None:
        _copy_leaves(view, other)
        self.witnesses.append(self.pool.source[id(other)])

    # ------------------------------------------------------------------ last resort
    def _borrow(self) -> bool:
        """A changed copy of another test's ``assert <pure call> == <expected>`` put first in this
        test (correct code fails it before anything else runs): from the same file, else from
        another preferred (hidden) file, else any, as long as this file imports its names."""
        name = self.func.name
        scope = self.module.body if self.module is not None else []
        known = self.constants | {n.name for n in scope if isinstance(
            n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not n.name.startswith("test")}
        ranked: list[tuple[int, ast.Assert]] = []
        for path, found in self.pool.borrow.items():
            rank = 0 if path == self.file else 1 if path in self.pool.preferred else 2
            for test, stmt in found:
                if path == self.file and test.rsplit("::", 1)[-1] == name:
                    continue
                names = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)}
                if names <= known:
                    ranked.append((rank, stmt))
        self.rng.shuffle(ranked)
        ranked.sort(key=lambda r: r[0])
        for _, original in ranked:
            stmt = _clone(original)
            holder = ast.parse("def _():\n    pass\n").body[0]
            assert isinstance(holder, ast.FunctionDef)
            holder.body = [stmt]
            helper = _Mutator(holder, self.module, self.pool, self.rng, None)
            if helper._expected_values(close=True) or helper._expected_values(close=False):
                at = 1 if self.func.body and _is_docstring(self.func.body[0]) else 0
                self.func.body.insert(at, stmt)
                self.witnesses += [self.pool.source[id(original)], *helper.witnesses]
                return True
        return self._borrow_body()

    def _borrow_body(self) -> bool:
        """A changed copy of a whole other test of the same file (one without fixtures), put
        first: the tests of a grading run alone in any order, so that body fails here as its
        changed copy fails on its own."""
        found = [f for test, f in self.pool.bodies.get(self.file or "", []) if test != self.func.name]
        self.rng.shuffle(found)
        for original in found:
            other = _clone(original)
            helper = _Mutator(other, self.module, self.pool, self.rng, None)
            if helper._expected_values(close=True) or helper._other_checks() or \
                    helper._expected_values(close=False):
                at = 1 if self.func.body and _is_docstring(self.func.body[0]) else 0
                body = other.body[1:] if other.body and _is_docstring(other.body[0]) else other.body
                self.func.body[at:at] = body
                self.witnesses += [self.pool.source[id(original)], *helper.witnesses]
                return True
        return False


class _Inputs:
    """The literal inputs of a test (or of one comparison): values, strings, and their forms."""

    def __init__(self, leaves: list[ast.Constant]) -> None:
        values = [n.value for n in leaves]
        self.strings = [v for v in values if isinstance(v, str)] + \
            [v.decode("latin-1") for v in values if isinstance(v, bytes)]
        self.norm = [_normal(s) for s in self.strings]
        self.ints = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
        self.ints += [int(d) for s in self.strings for d in _DIGITS.findall(s)]
        self.floats = [v for v in values if isinstance(v, float)]
        self.words = {w for s in self.norm for w in _WORD.findall(s)}
        self._int_set, self._float_set = set(self.ints), set(self.floats)

    def has_int(self, v: int) -> bool:
        return v in self._int_set

    def has_float(self, v: float) -> bool:
        return v in self._float_set or repr(v) in " ".join(self.strings)

    def has_text(self, s: str) -> tuple[bool, bool, bool]:
        norm = _normal(s)
        return (any(s in t for t in self.strings), any(norm in t for t in self.norm),
                all(w in self.words for w in _WORD.findall(norm)))


_DIGITS = re.compile(r"\d+")
_WORD = re.compile(r"\w+")


def _normal(text: str) -> str:
    """Case-folded, compatibility-decomposed, marks dropped: how an expected string relates to
    an input one ("Ångström" -> "angstrom")."""
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c)).casefold()


def _features(value: object, near: _Inputs, far: _Inputs, level: int, loose: bool = False) -> _Feature:
    """What a replacement must share with ``value``: its kind and form always; with level 1 its
    relation to the comparison's own inputs; with level 2 to all of the test's inputs too.
    ``loose``: a string's form is its runs of character classes (``"ok"`` and ``"pipe"`` alike),
    for replacements that are themselves whole inputs or words of them."""
    if isinstance(value, bool):
        return (bool,)
    if isinstance(value, int):
        form: _Feature = (int, value < 0, len(str(abs(value))))
        rel: list[Callable[[], _Feature]] = [lambda: (near.has_int(value),),
                                             lambda: (far.has_int(value),)]
    elif isinstance(value, float):
        text = repr(abs(value))
        shape = ("e", len(text)) if "e" in text or "n" in text else \
            (len(text.split(".")[0]), len(text.split(".")[1]))
        form = (float, value < 0, shape)
        rel = [lambda: (near.has_float(value),), lambda: (far.has_float(value),)]
    elif isinstance(value, (str, bytes)):
        text = value.decode("latin-1") if isinstance(value, bytes) else value
        classes = tuple(_char_class(c) for c in text)
        form = (type(value), tuple(c for i, c in enumerate(classes) if i == 0 or classes[i - 1] != c)) \
            if loose else (type(value), len(text), classes)
        rel = [lambda: near.has_text(text), lambda: far.has_text(text)]
    else:
        return (type(value), value)
    return form + tuple(x for r in rel[:level] for x in r())  # the costly part only when asked


@functools.lru_cache(maxsize=4096)
def _char_class(c: str) -> str:
    if c.isascii():
        if c.islower():
            return "a"
        if c.isupper():
            return "A"
        if c.isdigit():
            return "0"
        return c  # punctuation and spaces stay what they are
    if c.isalpha() or c.isdigit():
        name = unicodedata.name(c, "")
        return f"{name.split(' ')[0]}:{'l' if c.islower() else 'u' if c.isupper() else 'x'}"
    return c


def _candidates(value: object, near: _Inputs, far: _Inputs, pool: MutationPool, chars: str,
                rng: random.Random, level: int, loose: bool = True) -> Iterator[object]:
    """Replacement values for ``value`` in the order to try them: drawn from the values of the
    same kind in the test's inputs and the task's expected values (by their frequency there)
    when there are enough of those, else also from small changes of ``value``; every one has
    ``value``'s :func:`_features` at ``level``."""
    want = _features(value, near, far, level)
    drawn: list[object]
    made: list[object]
    if isinstance(value, bool):
        yield not value
        return
    if isinstance(value, int):
        drawn = [*near.ints, *far.ints, *(v for v in pool.expected if type(v) is int)]
        made = [value + s * d for s in (1, -1) for d in (*range(1, 10), *range(10, 100, 10),
                                                          *range(100, 1000, 100))]
        digits = len(str(abs(value)))
        low = 0 if digits == 1 else 10 ** (digits - 1)
        made += [(-1 if value < 0 else 1) * rng.randrange(low, 10 ** digits) for _ in range(8)]
    elif isinstance(value, float):
        drawn = [*near.floats, *far.floats, *(v for v in pool.expected if type(v) is float)]
        text = repr(abs(value))
        places = len(text.split(".")[1]) if "." in text and "e" not in text else 0
        made = [round(value + s * d * 10 ** -places, places) for s in (1, -1) for d in range(1, 10)]
        made += [round(value + s * d * 10 ** (1 - places), places) for s in (1, -1) for d in range(1, 10)]
    elif isinstance(value, (str, bytes)):
        text = value.decode("latin-1") if isinstance(value, bytes) else value
        if isinstance(value, str) and level and loose:
            # a whole input, or words of the inputs, in place of the same: every token of the
            # expected value still occurs among the inputs when it did before
            loose_want = _features(value, near, far, level, loose=True)
            tokens = [*near.strings, *far.strings]
            words = [w for s in tokens for w in _WORD.findall(s)]
            tokens += [text[:m.start()] + w + text[m.end():] for m in _WORD.finditer(text)
                       for w in words if w != m.group()]
            loose = [v for v in tokens if v != value
                     and _features(v, near, far, level, loose=True) == loose_want]
            rng.shuffle(loose)
            yield from dict.fromkeys(loose)
        strings = [*near.strings, *near.norm, *far.strings, *far.norm,
                   *(v for v in pool.expected if isinstance(v, str))]
        drawn = [s[i:i + len(text)] for s in strings for i in range(len(s) - len(text) + 1)] \
            if text else []
        made = _text_changes(text, chars, strings, rng)
        if isinstance(value, bytes):
            drawn = [_latin1(s) for s in drawn]
            made = [_latin1(s) for s in made]
            drawn, made = [d for d in drawn if d is not None], [m for m in made if m is not None]
    else:
        return
    form = _features(value, near, far, 0)  # the cheap part first: most draws differ in form
    verdicts: dict[object, bool] = {}

    def fits(v: object) -> bool:
        if v not in verdicts:
            verdicts[v] = v != value and type(v) is type(value) and \
                _features(v, near, far, 0) == form and _features(v, near, far, level) == want
        return verdicts[v]
    ok = [v for v in drawn if fits(v)]
    rng.shuffle(ok)  # by frequency: a value seen often is tried early often
    if len(set(ok)) < 3:
        extra = [v for v in made if fits(v)]
        rng.shuffle(extra)
        ok += extra
        rng.shuffle(ok)
    yield from dict.fromkeys(ok)


_STDLIB_VALUES = {"date": datetime.date, "datetime": datetime.datetime, "time": datetime.time,
                  "timedelta": datetime.timedelta, "Decimal": decimal.Decimal,
                  "Fraction": fractions.Fraction}


def _constructible(root: ast.expr) -> bool:
    """Whether the standard-library values in ``root`` (``date(2024, 2, 31)`` is none) can be
    made: one that cannot says "mutant" to any code that tries."""
    for node in ast.walk(root):
        if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)):
            name = node.func.id if isinstance(node.func, ast.Name) else node.func.attr
            make = _STDLIB_VALUES.get(name)
            if make is None or not all(_is_literal(a) for a in node.args) or \
                    not all(_is_literal(k.value) for k in node.keywords):
                continue
            try:
                make(*(ast.literal_eval(a) for a in node.args),
                     **{k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg})
            except (ValueError, TypeError, ArithmeticError, decimal.InvalidOperation):
                return False
    return True


def _stdlib_values(root: ast.expr, leaves: list[ast.Constant]) -> list[object]:
    """The standard-library values in ``root`` that hold one of ``leaves``, made (a changed
    argument must change the value they make)."""
    ids = {id(n) for n in leaves}
    out: list[object] = []
    for node in ast.walk(root):
        if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)) and \
                any(id(n) in ids for n in ast.walk(node)):
            make = _STDLIB_VALUES.get(node.func.id if isinstance(node.func, ast.Name) else node.func.attr)
            if make is None:
                continue
            try:
                out.append(make(*(ast.literal_eval(a) for a in node.args),
                                **{k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg}))
            except (ValueError, TypeError, ArithmeticError, decimal.InvalidOperation, SyntaxError):
                out.append(None)
    return out


def _latin1(text: str) -> bytes | None:
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        return None


def _text_changes(text: str, chars: str, strings: list[str], rng: random.Random) -> list[str]:
    """``text`` with one word replaced by a same-length word of the inputs, or one letter or
    digit by another of the same class (from the test's own characters first)."""
    changes = []
    # in order of first appearance (a set's order would follow the process's string hashing)
    words = list(dict.fromkeys(w for s in strings for w in _WORD.findall(s)))
    for m in _WORD.finditer(text):
        changes += [text[:m.start()] + w + text[m.end():] for w in words
                    if len(w) == len(m.group()) and w != m.group()]
    for i, ch in enumerate(text):
        cls = _char_class(ch)
        if len(cls) == 1 and not cls.isalnum():  # punctuation and spaces keep their place
            continue
        same = [c for c in dict.fromkeys(chars) if c != ch and _char_class(c) == cls]
        alphabet = {"a": string.ascii_lowercase, "A": string.ascii_uppercase, "0": string.digits}
        same += [c for c in alphabet.get(cls, "") if c != ch]
        changes += [text[:i] + c + text[i + 1:] for c in same]
    return changes


def _shape_signature(root: ast.expr) -> list[object]:
    """For every sequence in ``root`` whose items compare: sorted up or down (strictly or not),
    and whether the items are distinct; a mutant keeps these (an out-of-order item says which
    one of a pair was changed)."""
    sig: list[object] = []
    for node in ast.walk(root):
        elts = node.elts if isinstance(node, (ast.List, ast.Tuple, ast.Set)) else \
            node.args if isinstance(node, ast.Call) else None
        if not elts or len(elts) < 2:
            continue
        keys = [_key(e) for e in elts]
        if any(k is _NO_KEY for k in keys):
            continue
        try:
            pairs = list(itertools.pairwise(keys))
            sig.append((all(a <= b for a, b in pairs), all(a < b for a, b in pairs),
                        all(a >= b for a, b in pairs), all(a > b for a, b in pairs),
                        len(set(map(repr, keys))) == len(keys)))
        except TypeError:
            sig.append(len(set(map(repr, keys))) == len(keys))
    return sig


_NO_KEY = object()


def _key(node: ast.expr) -> object:
    if _is_literal(node):
        try:
            return ast.literal_eval(node)
        except ValueError:
            return _NO_KEY
    if isinstance(node, ast.Call) and node.args and not node.keywords:
        keys = tuple(_key(a) for a in node.args)
        return _NO_KEY if any(k is _NO_KEY for k in keys) else keys
    return _NO_KEY


def _leaf_values(root: ast.expr) -> list[tuple[object, ast.Constant]]:
    parents = {id(c): p for p in ast.walk(root) for c in ast.iter_child_nodes(p)}
    out = []
    for leaf in ast.walk(root):
        if isinstance(leaf, ast.Constant) and isinstance(leaf.value, (bool, int, float, str, bytes)):
            parent = parents.get(id(leaf))
            negative = isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.USub)
            value = -leaf.value if negative and isinstance(leaf.value, (int, float)) else leaf.value
            out.append((value, leaf))
    return out


def _prefix_literals(test: ast.expr) -> list[ast.expr]:
    """The literal argument of ``x.startswith("...")`` / ``endswith``: no string starts with two
    different prefixes of the same length."""
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute) and \
            test.func.attr in ("startswith", "endswith") and len(test.args) == 1 and \
            not test.keywords and isinstance(test.args[0], ast.Constant) and \
            isinstance(test.args[0].value, (str, bytes)) and test.args[0].value:
        return [test.args[0]]
    return []


def _mutate_pattern(pattern: str, chars: str, rng: random.Random) -> str | None:
    """A ``match=`` pattern with one letter or digit changed in every alternative (a message
    that matched one alternative must not match its changed twin); plain patterns only."""
    if any(c in pattern for c in "\\()[]{}.^$*+?"):
        return None
    parts = pattern.split("|")
    out = []
    for part in parts:
        spots = [i for i, c in enumerate(part) if c.isalnum()]
        if not spots:
            return None
        i = rng.choice(spots)
        cls = _char_class(part[i])
        same = [c for c in dict.fromkeys(chars + string.ascii_lowercase)
                if c != part[i] and _char_class(c) == cls]
        if not same:
            return None
        out.append(part[:i] + rng.choice(same) + part[i + 1:])
    return "|".join(out)


def _builtin_exception(name: str) -> type[BaseException] | None:
    obj = getattr(builtins, name, None)
    return obj if isinstance(obj, type) and issubclass(obj, Exception) and obj is not Exception else None


def _unrelated(a: type[BaseException], b: type[BaseException] | None) -> bool:
    return b is not None and not issubclass(a, b) and not issubclass(b, a)


def _exchange(a: ast.expr, b: ast.expr) -> None:
    la = [n for n in ast.walk(a) if isinstance(n, ast.Constant)]
    lb = [n for n in ast.walk(b) if isinstance(n, ast.Constant)]
    values_a, values_b = [n.value for n in la], [n.value for n in lb]
    for leaf, v in zip(la, values_b, strict=True):
        leaf.value = v
    for leaf, v in zip(lb, values_a, strict=True):
        leaf.value = v


def _copy_leaves(target: ast.expr, source: ast.expr) -> None:
    for leaf, other in zip([n for n in ast.walk(target) if isinstance(n, ast.Constant)],
                           [n for n in ast.walk(source) if isinstance(n, ast.Constant)], strict=True):
        leaf.value = other.value


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and \
        isinstance(stmt.value.value, str)


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
    classes = collected_classes(tree)
    # the test's class and the test classes it derives from (their own tests removed)
    ancestors: set[str] = set()
    todo = [item.cls] if item.cls else []
    while todo:
        name = todo.pop()
        if name in classes and name not in ancestors:
            ancestors.add(name)
            todo += [_base_name(b) for b in classes[name].bases]
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            if item.cls is None and node.name == item.name:
                keep.append(_copy(node))
        elif isinstance(node, ast.ClassDef) and node.name in classes:
            if node.name in ancestors:
                cls = _copy(node)
                cls.body = [m for m in cls.body if not (
                    isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
                    and m.name.startswith("test") and not (node.name == item.cls
                                                           and m.name == item.name))]
                cls.body = cls.body or [ast.Pass()]
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


#: unittest assertions that hold when their first two arguments are equal
_UNITTEST_EQUAL = frozenset({"assertEqual", "assertEquals", "assertListEqual", "assertTupleEqual",
                             "assertDictEqual", "assertSetEqual", "assertSequenceEqual",
                             "assertMultiLineEqual", "assertAlmostEqual", "assertAlmostEquals"})
#: every assertion ``unittest.TestCase`` defines (a project's own ``self.assert*`` is none of them)
_UNITTEST_NAMES = frozenset(n for n in dir(unittest.TestCase) if n.startswith(("assert", "fail")))


def _as_assert(stmt: ast.stmt) -> ast.Assert | None:
    """The check a statement makes, as an ``assert`` whose operands *are* the statement's nodes
    (a leaf changed through it changes the statement): an ``assert`` itself;
    ``self.assertEqual(a, b)`` and its equality kin as ``assert a == b``; ``self.assertTrue(x)``
    / ``assertFalse(x)`` as ``assert x`` / ``assert not x``; and a project's own
    ``self.assertX(a, b, ...)`` (one ``unittest.TestCase`` does not define, such as markdown's
    ``assertMarkdownRenders(source, expected)``) as ``assert a == b``: a mutant of it that
    correct code still passes fails the synthesis gate (the reference fix must score 1), so a
    helper that is no equality costs a task, never a wrong verdict. Else ``None``."""
    if isinstance(stmt, ast.Assert):
        return stmt
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return None
    call = stmt.value
    func = call.func
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
            and func.value.id == "self" and func.attr.startswith("assert")) or \
            any(isinstance(a, ast.Starred) for a in call.args):
        return None
    args, name = call.args, func.attr
    test: ast.expr
    if name in ("assertTrue", "assert_") and args:
        test = args[0]
    elif name == "assertFalse" and args:
        test = ast.UnaryOp(op=ast.Not(), operand=args[0])
    elif len(args) >= 2 and (name in _UNITTEST_EQUAL or name not in _UNITTEST_NAMES):
        test = ast.Compare(left=args[0], ops=[ast.Eq()], comparators=[args[1]])
    else:
        return None
    return ast.copy_location(ast.Assert(test=test, msg=None), stmt)


def _case_expected(func: ast.FunctionDef | ast.AsyncFunctionDef, asserts: list[ast.Assert]
                   ) -> list[ast.expr]:
    """In a parametrized test's cases, the values of the parameters an unconditional
    ``assert <computed> == <parameter>`` compares with (``expected`` in ``(x, expected)``):
    changing one case's makes correct code fail that case, so the test (all its cases in one
    process) fails. A parameter that also feeds the computed side is an input, never changed."""
    out: list[ast.expr] = []
    for names, cases in _parameters(func):
        wanted = set()
        for a in asserts:
            sides = _eq_sides(a.test)
            for side, other in zip(sides, reversed(sides), strict=True):
                read = {n.id for n in ast.walk(other) if isinstance(n, ast.Name)}
                if isinstance(side, ast.Name) and side.id in names and side.id not in read:
                    wanted.add(names.index(side.id))
        for case in cases:
            if isinstance(case, ast.Call) and _base_name(case.func) == "param":
                values = case.args  # pytest.param(x, expected, id=...)
            elif len(names) == 1:
                values = [case]
            elif isinstance(case, (ast.Tuple, ast.List)):
                values = case.elts
            else:
                continue
            if len(values) == len(names):
                out += [values[i] for i in sorted(wanted) if _is_expected(values[i])]
    return out


def _dedent(node: ast.expr) -> bool:
    """``dedent("...")`` / ``self.dedent("...")``: a literal text, reformatted."""
    return isinstance(node, ast.Call) and _base_name(node.func) == "dedent" and \
        len(node.args) == 1 and not node.keywords and isinstance(node.args[0], ast.Constant) and \
        isinstance(node.args[0].value, str)


def _eq_sides(test: ast.expr) -> list[ast.expr]:
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
        return [test.left, test.comparators[0]]
    return []


def _is_expected(node: ast.expr, names: frozenset[str] | set[str] = frozenset()) -> bool:
    """A literal, or a value built from literals only (``[date(2024, 1, 31)]``, ``Decimal("1.5")``);
    inside a container, ``names`` (imported constants such as ``USER_AGENT``) count as fixed
    values too."""
    return _expected(node, names, top=True)


def _expected(node: ast.expr, names: frozenset[str] | set[str], top: bool) -> bool:
    if _is_literal(node):
        return True
    if isinstance(node, ast.Name):
        return not top and node.id in names
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return all(_expected(e, names, False) for e in node.elts) and \
            (not top or any(isinstance(n, ast.Constant) for n in ast.walk(node)))
    if isinstance(node, ast.Dict):
        return all(k is not None and _expected(k, names, False) for k in node.keys) and \
            all(_expected(v, names, False) for v in node.values) and \
            (not top or any(isinstance(n, ast.Constant) for n in ast.walk(node)))
    if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)):
        return bool(node.args or node.keywords) and all(_expected(a, names, False) for a in node.args) and \
            all(_expected(k.value, names, False) for k in node.keywords) and \
            any(isinstance(n, ast.Constant) for n in ast.walk(node))
    return False


def _eq_literals(test: ast.expr, names: frozenset[str] | set[str] = frozenset()) -> list[ast.expr]:
    """The expected side of ``assert a == b``: the one side that is a literal, or built from
    literals (and ``names``); when both are, by convention the right one, unless both are
    calls of the same function (``f(1) == f(2)`` says nothing about which one is expected)."""
    sides = _eq_sides(test)
    if len(sides) != 2:
        return []
    for kind in (_is_literal, functools.partial(_is_expected, names=names)):
        if kind(sides[0]) != kind(sides[1]):  # exactly one side is the expected value
            return [s for s in sides if kind(s)]
    if all(isinstance(x, ast.Call) for x in sides) and not all(_dedent(x) for x in sides) and \
            ast.dump(sides[0].func) == ast.dump(sides[1].func):  # type: ignore[attr-defined]
        return []
    return [sides[1]] if _is_expected(sides[1], names) else []


def _eq_names(test: ast.expr) -> list[ast.Name]:
    return [s for s in _eq_sides(test) if isinstance(s, ast.Name)]


