"""Seeded, deterministic AST bug operators: each finds its sites in a module and rewrites one.

A site is a place inside a function body (never module or class level, never a decorator,
default value or annotation: those run at import, where no single test sees them). A mutation is
a byte-level splice of the source, so the rest of the file keeps its formatting and the diff
shows only the bug. The same source, operator and site index always give the same mutant
(``tests/tasks/test_synth_operators.py``).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

_FLIP_CMP: dict[type, tuple[type, str]] = {
    ast.Eq: (ast.NotEq, "!="), ast.NotEq: (ast.Eq, "=="), ast.Lt: (ast.LtE, "<="),
    ast.LtE: (ast.Lt, "<"), ast.Gt: (ast.GtE, ">="), ast.GtE: (ast.Gt, ">"),
    ast.Is: (ast.IsNot, "is not"), ast.IsNot: (ast.Is, "is"), ast.In: (ast.NotIn, "not in"),
    ast.NotIn: (ast.In, "in"),
}
_CMP_TEXT = re.compile(rb"(is\s+not|not\s+in|==|!=|<=|>=|<|>|\bis\b|\bin\b)")


@dataclass(frozen=True)
class Site:
    """One place an operator can change: the enclosing function (for test selection: the
    ``co_firstlineno`` and name its code object will have) and the splice."""

    operator: str
    index: int  # position among this operator's sites in the module
    function: str
    first_line: int  # the function's first line (its first decorator's, if any)
    line: int  # the changed node's first line
    edits: tuple[tuple[int, int, bytes], ...]  # (start, end, replacement) byte offsets


class _Source:
    def __init__(self, source: bytes) -> None:
        self.data = source
        self.starts = [0]
        for i, b in enumerate(source):
            if b == 0x0A:
                self.starts.append(i + 1)

    def off(self, line: int, col: int) -> int:
        return self.starts[line - 1] + col

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (self.off(node.lineno, node.col_offset),  # type: ignore[attr-defined]
                self.off(node.end_lineno, node.end_col_offset))  # type: ignore[attr-defined]

    def text(self, node: ast.AST) -> bytes:
        a, b = self.span(node)
        return self.data[a:b]

    def whole_lines(self, node: ast.stmt) -> tuple[int, int] | None:
        """The byte span of the lines ``node`` fills alone (``None`` if it shares a line)."""
        a, b = self.span(node)
        line_a = self.starts[node.lineno - 1]
        end_line = node.end_lineno or node.lineno
        line_b = self.starts[end_line] if end_line < len(self.starts) else len(self.data)
        before, after = self.data[line_a:a], self.data[b:line_b]
        if before.strip() or (after.strip() and not after.strip().startswith(b"#")):
            return None
        return line_a, line_b


def _function_bodies(tree: ast.Module) -> Iterator[tuple[ast.FunctionDef | ast.AsyncFunctionDef, ast.AST]]:
    """(function, node) for every node of every function's body, not crossing into nested
    functions or classes (their own bodies are visited as their own functions)."""
    for func in ast.walk(tree):
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        yield func, func  # its own body: the statements the drop operators may remove
        todo: list[ast.AST] = list(reversed(func.body))
        while todo:  # depth first, in source order
            node = todo.pop()
            yield func, node
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            todo.extend(reversed(list(ast.iter_child_nodes(node))))


def _is_docstring(node: ast.AST) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and \
        isinstance(node.value.value, str)


Finder = Callable[[_Source, ast.AST], list[tuple[tuple[int, int, bytes], ...]]]


def _flip_compare(src: _Source, node: ast.AST) -> list[tuple[tuple[int, int, bytes], ...]]:
    if not isinstance(node, ast.Compare):
        return []
    out = []
    operands = [node.left, *node.comparators]
    for i, op in enumerate(node.ops):
        gap_a, gap_b = src.span(operands[i])[1], src.span(operands[i + 1])[0]
        gap = src.data[gap_a:gap_b]
        found = list(_CMP_TEXT.finditer(gap))
        if len(found) != 1 or type(op) not in _FLIP_CMP:
            continue
        m = found[0]
        out.append(((gap_a + m.start(), gap_a + m.end(), _FLIP_CMP[type(op)][1].encode()),))
    return out


def _flip_boolean(src: _Source, node: ast.AST) -> list[tuple[tuple[int, int, bytes], ...]]:
    if not isinstance(node, ast.BoolOp):
        return []
    new = b"or" if isinstance(node.op, ast.And) else b"and"
    old = rb"\band\b" if isinstance(node.op, ast.And) else rb"\bor\b"
    edits = []
    for left, right in zip(node.values, node.values[1:], strict=False):
        gap_a, gap_b = src.span(left)[1], src.span(right)[0]
        found = list(re.finditer(old, src.data[gap_a:gap_b]))
        if len(found) != 1:
            return []
        edits.append((gap_a + found[0].start(), gap_a + found[0].end(), new))
    return [tuple(edits)]


def _int_const(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int


def _off_by_one_constant(src: _Source, node: ast.AST) -> list[tuple[tuple[int, int, bytes], ...]]:
    if not _int_const(node):
        return []
    value = node.value  # type: ignore[attr-defined]
    a, b = src.span(node)
    if not src.data[a:b].strip().isdigit():  # 0x10, 1_000: leave the spelling alone
        return []
    return [((a, b, str(value + 1).encode()),), ((a, b, str(max(value - 1, 0)).encode()),)
            if value > 0 else ((a, b, str(value + 2).encode()),)]


def _off_by_one_slice(src: _Source, node: ast.AST) -> list[tuple[tuple[int, int, bytes], ...]]:
    if not isinstance(node, ast.Slice):
        return []
    out = []
    for bound in (node.lower, node.upper):
        if bound is None:
            continue
        a, b = src.span(bound)
        text = src.data[a:b]
        out.append(((a, b, b"(" + text + b") + 1"),))
        out.append(((a, b, b"(" + text + b") - 1"),))
    return out


def _invert_condition(src: _Source, node: ast.AST) -> list[tuple[tuple[int, int, bytes], ...]]:
    if not isinstance(node, (ast.If, ast.While, ast.IfExp)):
        return []
    a, b = src.span(node.test)
    return [((a, b, b"not (" + src.data[a:b] + b")"),)]


def _dedent_body(src: _Source, node: ast.If) -> bytes | None:
    first, last = node.body[0], node.body[-1]
    a = src.starts[first.lineno - 1]
    end_line = last.end_lineno or last.lineno
    b = src.starts[end_line] if end_line < len(src.starts) else len(src.data)
    outer = src.data[src.starts[node.lineno - 1]:src.off(node.lineno, node.col_offset)]
    inner = src.data[a:src.off(first.lineno, first.col_offset)]
    if outer.strip() or inner.strip() or not inner.startswith(outer) or len(inner) <= len(outer):
        return None
    cut = len(inner) - len(outer)
    lines = []
    for line in src.data[a:b].splitlines(keepends=True):
        if line.strip() and not line.startswith(inner):
            return None  # a continuation or string line less indented than the body
        lines.append(line[cut:] if line.strip() else line)
    return b"".join(lines)


def _drop_condition(src: _Source, node: ast.AST) -> list[tuple[tuple[int, int, bytes], ...]]:
    if not isinstance(node, ast.If) or node.orelse:
        return []
    span = src.whole_lines(node)
    body = _dedent_body(src, node)
    if span is None or body is None:
        return []
    return [((span[0], span[1], body),)]


def _drop_from_body(src: _Source, node: ast.AST,
                    kinds: tuple[type, ...]) -> list[tuple[tuple[int, int, bytes], ...]]:
    out = []
    for field in ("body", "orelse", "finalbody"):
        body = getattr(node, field, None)
        if not isinstance(body, list) or len(body) < 2:
            continue
        for stmt in body:
            if not isinstance(stmt, kinds) or _is_docstring(stmt):
                continue
            span = src.whole_lines(stmt)
            if span is not None:
                out.append(((span[0], span[1], b""),))
    return out


def _drop_statement(src: _Source, node: ast.AST) -> list[tuple[tuple[int, int, bytes], ...]]:
    return _drop_from_body(src, node, (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign))


def _drop_loop(src: _Source, node: ast.AST) -> list[tuple[tuple[int, int, bytes], ...]]:
    return _drop_from_body(src, node, (ast.For, ast.While))


def _swap_arguments(src: _Source, node: ast.AST) -> list[tuple[tuple[int, int, bytes], ...]]:
    if not isinstance(node, ast.Call) or len(node.args) < 2:
        return []
    x, y = node.args[0], node.args[1]
    if isinstance(x, ast.Starred) or isinstance(y, ast.Starred) or ast.dump(x) == ast.dump(y):
        return []
    (xa, xb), (ya, yb) = src.span(x), src.span(y)
    return [((xa, xb, src.data[ya:yb]), (ya, yb, src.data[xa:xb]))]


def _change_return(src: _Source, node: ast.AST) -> list[tuple[tuple[int, int, bytes], ...]]:
    if not isinstance(node, ast.Return) or node.value is None:
        return []
    value = node.value
    a, b = src.span(value)
    if isinstance(value, ast.Constant):
        if value.value is True or value.value is False:
            return [((a, b, b"False" if value.value else b"True"),)]
        if value.value is None:
            return []
        if _int_const(value):
            return [((a, b, str(value.value + 1).encode()),)]
    return [((a, b, b"None"),)]


#: The operators, in a fixed order (a task's ``operator`` names one of these).
OPERATORS: dict[str, Finder] = {
    "flip_compare": _flip_compare,
    "flip_boolean": _flip_boolean,
    "off_by_one_constant": _off_by_one_constant,
    "off_by_one_slice": _off_by_one_slice,
    "invert_condition": _invert_condition,
    "drop_condition": _drop_condition,
    "drop_statement": _drop_statement,
    "drop_loop": _drop_loop,
    "swap_arguments": _swap_arguments,
    "change_return": _change_return,
}


def sites(source: bytes, operators: tuple[str, ...] | None = None) -> list[Site]:
    """Every site of ``operators`` (default: all) in ``source``, in a fixed order."""
    unknown = set(operators or ()) - set(OPERATORS)
    if unknown:
        raise ValueError(f"unknown bug operators {sorted(unknown)}; known: {sorted(OPERATORS)}")
    tree = ast.parse(source)
    src = _Source(source)
    counts: dict[str, int] = {}
    out = []
    for func, node in _function_bodies(tree):
        if node is not func and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue  # a nested definition's body belongs to its own function
        first = min([d.lineno for d in func.decorator_list] + [func.lineno])
        for name in operators or tuple(OPERATORS):
            for edits in OPERATORS[name](src, node):
                index = counts.get(name, 0)
                counts[name] = index + 1
                out.append(Site(name, index, func.name, first, getattr(node, "lineno", func.lineno),
                                edits))
    return out


def apply_site(source: bytes, site: Site) -> bytes | None:
    """``source`` with ``site``'s splice applied, or ``None`` when the result does not compile."""
    out = source
    for start, end, new in sorted(site.edits, reverse=True):
        out = out[:start] + new + out[end:]
    if out == source:
        return None
    try:
        # every splice changes a token or a statement (a swap of equal arguments is no site), so
        # a module that still compiles is a different program; comparing whole trees would cost
        # a tenth of a second per candidate on a large module
        ast.parse(out)
    except SyntaxError:
        return None
    return out


def mutate(source: bytes, operator: str, index: int) -> tuple[Site, bytes]:
    """Site ``index`` of ``operator`` in ``source`` and the mutated source; raises
    ``ValueError`` if there is no such site or it does not give a valid, different module."""
    for site in sites(source, (operator,)):
        if site.index == index:
            mutated = apply_site(source, site)
            if mutated is None:
                raise ValueError(f"{operator} site {index} gives no valid, different module")
            return site, mutated
    raise ValueError(f"{operator} has no site {index} in this module")
