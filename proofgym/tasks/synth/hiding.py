"""What the agent sees of a synthesised task: test files without the failing tests (the bug
report is :mod:`proofgym.tasks.synth.statements`'), and the bug patch applied. The hidden tests
travel to grading only (``hidden/``)."""

from __future__ import annotations

import ast
from collections.abc import Sequence

from proofgym.core.errors import TestSourceError

_MESSAGE_CHARS = 160


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
