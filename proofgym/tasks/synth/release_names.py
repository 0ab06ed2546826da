"""What a release pair's test failures are about, and how one release's files continue the
other's: a name one release lacks (an API difference, not a behaviour), the names a source file
defines, the function around a line, the older file a newer one continues across a move."""

from __future__ import annotations

import ast
import builtins
import functools
import re
import symtable
from pathlib import Path

from proofgym.tasks.synth.hunks import Hunk
from proofgym.tasks.synth.testrun import TestOutcome

_MISSING = (re.compile(r"cannot import name '([\w.]+)'"), re.compile(r"No module named '([\w.]+)'"),
            re.compile(r"name '(\w+)' is not defined"), re.compile(r"has no attribute '(\w+)'"),
            re.compile(r"unexpected keyword argument '(\w+)'"))


def reverts_an_import(hunk: Hunk) -> bool:
    """Whether reverting ``hunk`` brings back an import line b does not have."""
    new = {line.strip() for line in hunk.new}
    return any(line.strip().startswith(("import ", "from ")) and " import" in f" {line.strip()}"
               and line.strip() not in new for line in hunk.old)


def counterpart(old_top: Path, path: str) -> str | None:
    """The file of the older release ``old_top`` that ``path`` (a source file of the newer one)
    continues: the same path, or across a move between a module and a package (``pkg.py`` ->
    ``pkg/__init__.py`` and back: inflection 0.5.1, ordered-set 4.1.0, parse 1.22.0) or into
    ``src/`` and out of it (hyperframe 6.0.0)."""
    moved = path[len("src/"):] if path.startswith("src/") else f"src/{path}"
    for candidate in (path, moved):
        if (old_top / candidate).is_file():
            return candidate
        if candidate.endswith("/__init__.py"):
            module = candidate[: -len("/__init__.py")] + ".py"
            if (old_top / module).is_file():
                return module
        elif candidate.endswith(".py") and (old_top / candidate[:-3] / "__init__.py").is_file():
            return candidate[:-3] + "/__init__.py"
    return None


def missing_name(outcome: TestOutcome, names: set[str]) -> str | None:
    """The name a failure is about when it is one ``names`` (a release's identifiers and module
    names) lacks: an API difference, not a behaviour. ``None`` for any other failure."""
    if outcome.exception not in ("ImportError", "ModuleNotFoundError", "NameError", "AttributeError",
                                 "TypeError", "UnboundLocalError"):
        return None
    for pattern in _MISSING:
        match = pattern.search(outcome.message or "")
        if match:
            name = match.group(1).rsplit(".", 1)[-1]
            return None if name in names else name
    return None


def behavioural(outcome: TestOutcome | None, names: set[str]) -> bool:
    """A test that ran and failed for a reason other than a name ``names`` lacks."""
    return (outcome is not None and outcome.outcome in ("failed", "error")
            and missing_name(outcome, names) is None)


def identifiers(path: str, data: bytes) -> set[str]:
    """The names ``data`` (one source file) defines: functions, classes, assigned names and
    attributes, parameters, imports; and the module or package names the file's path gives. A
    name only used (called, read) is not one: a test failing on it fails on a missing name. A file
    that does not parse gives every identifier in it."""
    out = {p for p in Path(path).with_suffix("").parts if p != "__init__"}
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError):
        return out | {w.decode() for w in re.findall(rb"[A-Za-z_][A-Za-z0-9_]*", data)}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            out.add(node.attr)
        elif isinstance(node, ast.arg):
            out.add(node.arg)
        elif isinstance(node, ast.alias):
            out.add((node.asname or node.name).rsplit(".", 1)[-1])
            out.update(node.name.split("."))
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            out.update(node.names)
    return out


def orphaned_names(before: bytes, after: bytes, path: str = "") -> set[str]:
    """The names ``after`` (a file with some hunks reverted) still reads but no longer defines,
    that ``before`` defined or resolved: a tree no release shipped (``import warnings`` reverted
    while ``warnings.warn`` stays; a function's ``original = ...`` reverted while its ``return
    self._new(result, original)`` stays, tomlkit 0.11.5). Such a failure hides behind any check
    that swallows the ``NameError`` (``pytest.warns`` reports "DID NOT WARN")."""
    try:
        tree = ast.parse(after)
    except (SyntaxError, ValueError):
        return set()
    defined = identifiers(path, after)
    if "*" in defined:  # a star import may define anything
        return set()
    reads = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    module_level = (reads & identifiers(path, before)) - defined - set(dir(builtins))
    was, now = unresolved_names(before, path), unresolved_names(after, path)
    return module_level | (now - was if was is not None and now is not None else set())


# set by the import system in every module's namespace, not by its code
_MODULE_NAMES = frozenset({"__file__", "__name__", "__doc__", "__spec__", "__loader__",
                           "__package__", "__path__", "__builtins__", "__cached__",
                           "__annotations__"})


@functools.lru_cache(maxsize=64)  # the same `before` file is asked again for each candidate
def unresolved_names(source: bytes, path: str = "") -> frozenset[str] | None:
    """The names a function or class body of ``source`` reads that no scope binds: neither its
    own (assigned, a parameter, imported), nor an enclosing function's, nor the module's, nor a
    builtin (each raises ``NameError`` when reached). ``None`` when ``source`` does not compile
    or star-imports (anything may be bound)."""
    try:
        table = symtable.symtable(source.decode("utf-8", "replace"), path or "<module>", "exec")
    except (SyntaxError, ValueError):
        return None
    if any(isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names)
           for node in ast.walk(ast.parse(source))):
        return None
    bound = {s.get_name() for s in table.get_symbols()
             if s.is_assigned() or s.is_imported() or s.is_namespace()}
    scopes, out = list(table.get_children()), set()
    while scopes:
        scope = scopes.pop()
        scopes.extend(scope.get_children())
        for sym in scope.get_symbols():
            if sym.is_declared_global() and sym.is_assigned():  # `global x; x = ...`
                bound.add(sym.get_name())
    scopes = list(table.get_children())
    while scopes:
        scope = scopes.pop()
        scopes.extend(scope.get_children())
        out.update(sym.get_name() for sym in scope.get_symbols()
                   if sym.is_referenced() and sym.is_global())
    return frozenset(out - bound - set(dir(builtins)) - _MODULE_NAMES)


def enclosing(source: bytes, line: int) -> str:
    """The innermost function or class around ``line`` of ``source`` (``""``: module level)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ""
    best, size = "", None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            first = min([d.lineno for d in node.decorator_list] + [node.lineno])
            last = node.end_lineno or node.lineno
            if first <= line <= last and (size is None or last - first < size):
                best, size = node.name, last - first
    return best


__all__ = ["behavioural", "counterpart", "enclosing", "identifiers", "missing_name",
           "orphaned_names", "reverts_an_import", "unresolved_names"]
