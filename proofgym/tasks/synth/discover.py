"""Finding a checkout's test functions and source files, from the files' AST (never by
importing them): pytest's default rules, as the grader lists tests."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from pathlib import Path

from proofgym.core.errors import RecipeError


def _is_test_file(name: str) -> bool:
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py")
                                     or name == "tests.py" or name.startswith("test"))


def list_test_files(top: Path, roots: Sequence[str]) -> list[str]:
    """The test files under ``roots`` (files or directories, relative to ``top``)."""
    out = set()
    for root in roots:
        path = top / root
        if path.is_file():
            out.add(root)
        elif path.is_dir():
            out.update(str(p.relative_to(top)) for p in path.rglob("*.py") if _is_test_file(p.name))
        else:
            raise RecipeError(f"test path {root!r} is not in {top}; the recipe names a path the "
                              "sdist does not ship")
    return sorted(out)


def list_test_functions(path: str, source: bytes) -> list[str]:
    """Node ids of the test functions of one file, as the grader lists them
    (``proofgym.verify.sandboxed.mutants.list_tests``; a test checks the two agree): ``test*``
    functions at module level, parametrized ones included (one id per function: the grader runs
    all its cases in one test process), and the own ``test*`` methods of ``Test*`` classes
    without ``__init__`` and of every class deriving from a ``*TestCase`` (or from such a class
    of the file), whatever its name; no class that sets ``__test__ = False``."""
    tree = ast.parse(source)
    out = []
    unit: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            out.append(f"{path}::{node.name}")
        elif isinstance(node, ast.ClassDef):
            if any(isinstance(s, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__test__"
                                                     for t in s.targets)
                   and isinstance(s.value, ast.Constant) and not s.value.value for s in node.body):
                continue
            methods = [n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
            if any(_base(b).endswith("TestCase") or _base(b) in unit for b in node.bases):
                unit.add(node.name)
            elif not node.name.startswith("Test") or any(m.name == "__init__" for m in methods):
                continue
            out += [f"{path}::{node.name}::{m.name}" for m in methods if m.name.startswith("test")]
    return out


def list_parametrized(path: str, source: bytes) -> set[str]:
    """The ids of :func:`list_test_functions` whose function or class has a ``parametrize``
    decorator: the grader runs all their cases in one test process (a test that pytest runs as
    several items for another reason, a parametrized fixture, is not among them)."""
    tree = ast.parse(source)
    marked = {node.name for node in ast.walk(tree)
              if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
              and any(isinstance(d, ast.Call) and _base(d.func) == "parametrize"
                      for d in node.decorator_list)}
    return {t for t in list_test_functions(path, source)
            if any(part in marked for part in t.split("::")[1:])}


def _base(node: ast.expr) -> str:
    return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")


def source_files(top: Path, roots: Sequence[str], exclude: Sequence[str]) -> list[str]:
    """The ``.py`` files under ``roots`` that are not under one of ``exclude`` (the tests)."""
    out = set()
    for root in roots:
        path = top / root
        files = [path] if path.is_file() else sorted(path.rglob("*.py")) if path.is_dir() else None
        if files is None:
            raise RecipeError(f"source path {root!r} is not in {top}")
        for file in files:
            rel = str(file.relative_to(top))
            if any(rel == e or rel.startswith(e.rstrip("/") + "/") for e in exclude):
                continue
            if _is_test_file(file.name) or "/tests/" in f"/{rel}" or file.name == "conftest.py":
                continue
            out.add(rel)
    return sorted(out)
