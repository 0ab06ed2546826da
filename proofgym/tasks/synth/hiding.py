"""What the agent sees of a synthesised task: test files without the failing tests (the bug
report is :mod:`proofgym.tasks.synth.statements`'), and the bug patch applied, without the
sdist's leftovers that hold a hidden test or the original code (:func:`stale_copies`). The
hidden tests travel to grading only (``hidden/``)."""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from pathlib import Path

from proofgym.core.errors import TestSourceError

_MESSAGE_CHARS = 160


def definition(body: Sequence[ast.stmt], names: Sequence[str]) -> ast.stmt | None:
    """The function or class at the dotted path ``names`` (a test id's ``Class::test``) among
    ``body``'s statements and their nested bodies, or ``None``."""
    found: ast.stmt | None = None
    for name in names:
        found = next((s for s in body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                         ast.ClassDef)) and s.name == name), None)
        if found is None:
            return None
        body = found.body
    return found


def _span_lines(node: ast.AST) -> tuple[int, int]:
    first = min([d.lineno for d in getattr(node, "decorator_list", [])] + [node.lineno])  # type: ignore[attr-defined]
    return first, node.end_lineno or node.lineno  # type: ignore[attr-defined]


def strip_tests(source: bytes, node_ids: Sequence[str]) -> bytes:
    """``source`` (one test file) without the test functions ``node_ids`` name
    (``file::name`` or ``file::Class::name``); a class left without a statement gets ``pass``."""
    wanted = {tuple(n.split("::")[1:]) for n in node_ids}
    tree = ast.parse(source)
    lines = source.decode("utf-8").splitlines(keepends=True)
    drop: set[int] = set()
    insert: dict[int, str] = {}
    found: set[tuple[str, ...]] = set()

    def visit(body: list[ast.stmt], prefix: tuple[str, ...], owner: ast.ClassDef | None) -> None:
        kept = 0
        for stmt in body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and (*prefix, stmt.name) in wanted:
                a, b = _span_lines(stmt)
                drop.update(range(a, b + 1))
                found.add((*prefix, stmt.name))
            elif isinstance(stmt, ast.ClassDef) and owner is None:
                visit(stmt.body, (stmt.name,), stmt)
                kept += 1
            else:
                kept += 1
        if owner is not None and kept == 0:
            indent = " " * body[0].col_offset
            insert[_span_lines(body[0])[0]] = f"{indent}pass\n"

    visit(tree.body, (), None)
    missing = wanted - found
    if missing:
        raise TestSourceError(f"tests not defined in the file: {sorted('::'.join(m) for m in missing)}")
    out = []
    for number, line in enumerate(lines, start=1):
        if number in insert:
            out.append(insert[number])
        if number not in drop:
            out.append(line)
    return "".join(out).encode("utf-8")


def _lines(data: bytes) -> bytes:
    """``data`` as its stripped non-blank lines (a copy re-indented or re-wrapped in blank
    lines still matches)."""
    return b"\n".join(s for s in (line.strip() for line in data.splitlines()) if s)


def secrets_of(hidden: Mapping[str, bytes], node_ids: Sequence[str], patch: str) -> list[bytes]:
    """What the agent must not read, each as :func:`_lines` of it: the source of each hidden
    test (its decorators included) and, per hunk of ``patch`` that replaces or removes lines,
    the lines it replaces with their context (the original code)."""
    out = []
    for node in node_ids:
        path, *names = node.split("[", 1)[0].split("::")
        source = hidden[path]
        found = definition(ast.parse(source).body, names)
        if found is not None:
            first, last = _span_lines(found)
            out.append(_lines(b"\n".join(source.splitlines()[first - 1:last])))
    old: list[str] = []
    replaced = False
    for line in [*patch.splitlines(), "@@"]:
        if line.startswith(("@@", "--- ", "+++ ")):
            if replaced and old:
                out.append(_lines("\n".join(old).encode()))
            old, replaced = [], False
        elif line.startswith((" ", "-")):
            old.append(line[1:])
            replaced = replaced or line.startswith("-")
    return [s for s in out if s]


def stale_copies(repo: Path, secrets: Sequence[bytes]) -> list[Path]:
    """The files under ``repo`` that are not Python modules and hold one of ``secrets``
    (:func:`secrets_of`): an sdist's leftovers (``x.py.orig``, ``x.py~``, a text dump of a
    test file). A Python module holding one is the project's code (a vendored copy, another
    module's test of the same cases) and is not listed."""
    found = []
    for path in sorted(repo.rglob("*")):
        if path.suffix == ".py" or path.is_symlink() or not path.is_file():
            continue
        text = _lines(path.read_bytes())
        if any(secret in text for secret in secrets):
            found.append(path)
    return found
