"""What the agent sees of a synthesised task: test files without the failing tests, a bug report
built from the failing tests' names, exception types and trimmed messages (never test source),
and the bug patch applied. The hidden tests travel to grading only (``hidden/``)."""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping, Sequence

from proofgym.tasks.synth.testrun import TestOutcome

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
        raise ValueError(f"tests not defined in the file: {sorted('::'.join(m) for m in missing)}")
    out = []
    for number, line in enumerate(lines, start=1):
        if number in insert:
            out.append(insert[number])
        if number not in drop:
            out.append(line)
    return "".join(out).encode("utf-8")


def _words(name: str) -> str:
    return re.sub(r"^test_?", "", name).replace("_", " ").strip() or name


def trimmed_message(outcome: TestOutcome, test_sources: Sequence[bytes]) -> str | None:
    """The first line of a failure's message, cut short; ``None`` for assertion-rewrite text
    (it quotes the test's own expression) or a line that occurs in a test file."""
    message = (outcome.message or "").strip().splitlines()
    if not message:
        return None
    first = message[0].strip()
    if outcome.exception == "AssertionError" and first.startswith("assert "):
        return None
    first = first[:_MESSAGE_CHARS] + ("..." if len(first) > _MESSAGE_CHARS else "")
    probe = first.rstrip(".").strip()
    if len(probe) >= 6 and any(probe.encode() in s for s in test_sources):
        return None
    return first or None


def bug_report(project: str, failing: Mapping[str, TestOutcome], test_sources: Sequence[bytes],
               passing: int) -> tuple[str, str]:
    """(title, report) for a synthesised bug: which behaviour broke (from the failing tests'
    names), how it fails (exception type, trimmed message); never any test source."""
    names = sorted(failing)
    shown = [n.rsplit("::", 1)[-1] for n in names]
    title = f"{project}: {_words(shown[0])} is broken" + (f" (and {len(names) - 1} more)"
                                                           if len(names) > 1 else "")
    lines = [f"# {title}", "",
             f"After a recent change, {len(names)} of the project's tests fail while {passing} "
             "others still pass. The failing behaviour:", ""]
    for node, name in zip(names, shown, strict=True):
        outcome = failing[node]
        where = "::".join(node.split("::")[1:-1])
        label = f"`{name}`" + (f" (in `{where}`)" if where else "")
        how = outcome.exception or ("an error" if outcome.outcome == "error" else "a wrong result")
        line = f"- {label}: {_words(name)}; fails with {how}"
        message = trimmed_message(outcome, test_sources)
        if message:
            line += f": {message}"
        lines.append(line)
    lines += ["", "The failing tests are not in the repository; the remaining tests must keep "
              "passing. Fix the library code, not the tests."]
    return title, "\n".join(lines) + "\n"
