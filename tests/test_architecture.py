"""The import graph: layers point downward, the sandbox has one face, no module-level circles.

Read from the source (``ast``), never by importing: what a module imports at module level (not
under ``if TYPE_CHECKING:``, not inside functions) is what runs when it is imported.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "proofgym"


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


MODULES = _modules()


def _resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _top_imports(module: str) -> list[ast.Import | ast.ImportFrom]:
    tree = ast.parse(MODULES[module].read_text())
    out: list[ast.Import | ast.ImportFrom] = []
    todo = list(tree.body)
    while todo:
        node = todo.pop(0)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.append(node)
        elif isinstance(node, ast.If) and not _is_type_checking(node):
            todo[:0] = [*node.body, *node.orelse]
        elif isinstance(node, ast.Try):
            todo[:0] = [*node.body, *node.orelse, *node.finalbody,
                        *(s for h in node.handlers for s in h.body)]
    return out


def _absolute(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
    return f"{base}.{node.module}" if node.module else base


def _edges(module: str) -> set[str]:
    targets = set()
    for node in _top_imports(module):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            base = _absolute(module, node)
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base
                     for a in node.names]
        for name in names:
            target = _resolve(name)
            if target and target != module and target.startswith("proofgym"):
                targets.add(target)
    return targets


def test_no_module_level_import_circles():
    graph = {m: _edges(m) for m in MODULES}
    # the reader sees imports (a graph with no edges would pass anything)
    assert "proofgym.verify.sandboxed.mutants" in graph["proofgym.verify.sandboxed.isolated"]
    assert "proofgym.runtimes.sandbox.bwrap" in graph["proofgym.runtimes.sandbox.box"]
    # a package's __init__ re-exports its submodules; a submodule importing a sibling through
    # the package's face is not a circle of files
    for m in graph:
        graph[m] = {t for t in graph[m] if not (MODULES[t].name == "__init__.py" and m.startswith(t + "."))}
    circles, state = [], {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                circles.append([*stack[stack.index(nxt):], nxt])
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [])
    assert not circles, f"module-level import circles: {circles}"


#: packages with a face: code outside one imports only the names in its ``__all__``
FACED = ("proofgym.runtimes.sandbox", "proofgym.verify.pool", "proofgym.verify.sandboxed",
         "proofgym.verify.graders")


@pytest.mark.parametrize("package", FACED)
def test_nothing_outside_a_package_reaches_past_its_face(package):
    """Only the package itself, and only the names in its ``__all__``: the sandbox is assembled in
    one place (``box.py``), grading goes through one pool, and a hardening there holds everywhere.
    (A face's submodules may be imported as modules, e.g. ``from proofgym.verify.graders import
    answers``, only by tests, never by the library.)"""
    exported = set(importlib.import_module(package).__all__)
    offenders = []
    for module, path in MODULES.items():
        if module == package or module.startswith(package + "."):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                if node.module.startswith(package + "."):
                    offenders.append(f"{module}: from {node.module} import ...")
                elif node.module == package:
                    offenders += [f"{module}: {a.name}" for a in node.names if a.name not in exported]
            elif isinstance(node, ast.Import):
                offenders += [f"{module}: import {a.name}" for a in node.names
                              if a.name.startswith(package + ".")]
    assert not offenders, offenders
