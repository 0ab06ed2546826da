"""The layout of a grading: every test, real or mutant, alone in a freshly named file with a freshly
named function, in a random order (:func:`build_layout`); the mapping back to the real test ids
stays on the host (:class:`Layout`).
"""

from __future__ import annotations

import ast
import hashlib
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from proofgym.core.errors import TestSourceError
from proofgym.verify.sandboxed.mutants.listing import (
    TestItem,
    _base_name,
    _clone,
    _copy,
    _parse,
    ast_work,
    collected_classes,
    list_tests,
)
from proofgym.verify.sandboxed.mutants.mutator import mutate_test
from proofgym.verify.sandboxed.mutants.values import build_pool

_WORDS_A = ("basic", "edge", "empty", "nested", "unicode", "large", "mixed", "repeated", "single",
            "quoted", "invalid", "default", "reversed", "boundary", "sorted", "missing", "extra",
            "long", "short", "simple", "plain", "odd", "even", "first", "last", "many", "zero")
_WORDS_B = ("case", "input", "values", "order", "items", "keys", "range", "fields", "format",
            "limits", "errors", "paths", "names", "rows", "parse", "roundtrip", "spacing",
            "result", "output", "lookup", "update", "split", "merge", "count", "state", "text")


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
                 mutant_seed: bytes | None = None, mutants_only: int | None = None) -> Layout:
    """Lay out the ``wanted`` test ids (``file::[Class::]name``, files in ``sources``) and one
    mutant of each (where one can be built) as freshly named single-test files, shuffled.

    ``taken`` are workspace paths the generated files must not use; ``mutate_files`` limits
    mutants to the tests of those files (by default all). With ``mutant_seed`` each test's
    mutant is drawn from a generator seeded by it and the test's id (and source), so every
    grading of a task has the same mutants (only names and order are new): a grading whose
    tests leak (a channel between sandboxes) shows the same unlabelled pair every time, never a
    real value that recurs among changing mutants. Raises :class:`TestSourceError` for a wanted
    id that its file does not define.

    ``mutants_only``: lay out mutants alone, no real test, and only of the first tests of
    ``wanted`` (in its order) until that many are built (a batch's canaries: the mutants of
    the others would never run).
    """
    with ast_work():
        return _build_layout(sources, wanted, taken=taken, rng=rng, with_mutants=with_mutants,
                             mutate_files=mutate_files, mutant_seed=mutant_seed,
                             mutants_only=mutants_only)


def _mutant_rng(seed: bytes, node_id: str, source: bytes) -> random.Random:
    digest = hashlib.sha256(seed + b"\0" + node_id.encode() + b"\0" + source).digest()
    return random.Random(int.from_bytes(digest, "big"))


def _build_layout(sources: Mapping[str, bytes], wanted: Iterable[str], *,
                  taken: Iterable[str] = (), rng: random.Random | None = None,
                  with_mutants: bool = True, mutate_files: Iterable[str] | None = None,
                  mutant_seed: bytes | None = None, mutants_only: int | None = None) -> Layout:
    """The implementation of :func:`build_layout` (called with the AST lock held)."""
    rng = rng or random.SystemRandom()
    wanted = list(dict.fromkeys(wanted))
    layout = Layout()
    if mutant_seed is None:
        tests = _tests_and_mutants(sources, wanted, rng, with_mutants, mutate_files, None,
                                   mutants_only)
    else:  # the same every time for these inputs: built once per process, copied per grading
        key = hashlib.sha256(repr((sorted((p, bytes(c)) for p, c in sources.items()), wanted,
                                   with_mutants, None if mutate_files is None else sorted(mutate_files),
                                   mutant_seed, mutants_only)).encode()).digest()
        if key not in _BUILT:
            if len(_BUILT) >= _BUILT_MAX:
                _BUILT.pop(next(iter(_BUILT)))
            _BUILT[key] = _tests_and_mutants(sources, wanted, rng, with_mutants, mutate_files,
                                             mutant_seed, mutants_only)
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
                       mutant_seed: bytes | None, mutants_only: int | None = None,
                       ) -> tuple[list[tuple[TestItem, ast.Module, str | None, list[str]]], list[str]]:
    """Each wanted test as a module of its own, and its mutant where one can be built, as
    (item, module, id it is a mutant of or None, witnesses), in ``wanted`` order; and the
    ids no mutant could be built for. With ``mutant_seed`` the result depends on the arguments
    alone; without, the mutants are drawn from ``rng``. ``mutants_only``: see
    :func:`build_layout`."""
    mutate = set(sources if mutate_files is None else mutate_files)
    trees = {path: _parse(path, src) for path, src in sources.items()}
    pool = build_pool(trees, preferred=mutate, passing=wanted)
    listed = {item.node_id: item for path, src in sources.items() for item in list_tests(path, src)}
    missing = [w for w in wanted if w not in listed]
    if missing:
        raise TestSourceError(f"test ids not defined in their files (checked from the source): {missing}")
    entries: list[tuple[TestItem, ast.Module, str | None, list[str]]] = []
    unmutable: list[str] = []
    built = 0
    for node_id in wanted:
        if mutants_only is not None and built >= mutants_only:
            break
        item = listed[node_id]
        if mutants_only is None:
            entries.append((item, _isolate(trees[item.file], item), None, []))
        if with_mutants and not item.imported and item.file in mutate:
            mutated = _isolate(trees[item.file], item)
            witnesses: list[str] = []
            values = rng if mutant_seed is None else _mutant_rng(
                mutant_seed, node_id, bytes(sources[item.file]))
            if mutate_test(_target(mutated, item), values, mutated, pool, item.file, witnesses):
                entries.append((item, mutated, node_id, witnesses))
                built += 1
            else:
                unmutable.append(node_id)
    return entries, unmutable


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
