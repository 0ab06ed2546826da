"""Seeded, deterministic AST bug operators: each finds its sites in a module and rewrites one.

A site is a place inside a function body (never module or class level, never a decorator,
default value or annotation: those run at import, where no single test sees them). A mutation is
a byte-level splice of the source, so the rest of the file keeps its formatting and the diff
shows only the bug. The same source, operator and site index always give the same mutant
(``tests/tasks/test_synth_operators.py``).

Each edit is one a person could have typed: the opposite comparison operator rather than a
``not (...)`` wrapper, a constant changed to another literal rather than ``(2) + 1``, a dropped
statement together with the comment lines directly above it, ``return None`` only where the
function already returns ``None`` elsewhere, and arguments swapped only between two plain
variables of a call whose arguments have no fixed kinds (``isinstance(Pong, event)`` is no bug a
release ships). ``invert_condition`` (the ``not (...)`` wrapper) is retired: its finder stays so
that older records can be reproduced, but :func:`sites` no longer offers it by default.
"""

from __future__ import annotations

import ast
import bisect
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from proofgym.core.errors import ConfigError, PatchError

_FLIP_CMP: dict[type, tuple[type, str]] = {
    ast.Eq: (ast.NotEq, "!="), ast.NotEq: (ast.Eq, "=="), ast.Lt: (ast.LtE, "<="),
    ast.LtE: (ast.Lt, "<"), ast.Gt: (ast.GtE, ">="), ast.GtE: (ast.Gt, ">"),
    ast.Is: (ast.IsNot, "is not"), ast.IsNot: (ast.Is, "is"), ast.In: (ast.NotIn, "not in"),
    ast.NotIn: (ast.In, "in"),
}
#: The opposite of each comparison (what a person gets wrong when they invert a test).
_OPPOSITE: dict[type, str] = {
    ast.Eq: "!=", ast.NotEq: "==", ast.Lt: ">=", ast.GtE: "<", ast.Gt: "<=", ast.LtE: ">",
    ast.Is: "is not", ast.IsNot: "is", ast.In: "not in", ast.NotIn: "in",
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

        self.parents: dict[int, ast.AST] = {}
        self.func: ast.AST | None = None  # the function whose body is being searched

    def index(self, tree: ast.AST) -> None:
        for parent in ast.walk(tree):
            for child in ast.iter_child_nodes(parent):
                self.parents[id(child)] = parent

    def parent(self, node: ast.AST) -> ast.AST | None:
        return self.parents.get(id(node))

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


def _digits(src: _Source, node: ast.AST) -> bool:
    """A plain decimal literal (``0x10`` and ``1_000`` keep their spelling)."""
    return _int_const(node) and src.text(node).strip().isdigit()


def _negative(src: _Source, node: ast.AST) -> bool:
    return isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and \
        _digits(src, node.operand)


def _off_by_one_constant(src: _Source, node: ast.AST) -> list[tuple[tuple[int, int, bytes], ...]]:
    if _negative(src, node):  # -1 -> -2 (never "-0")
        value = node.operand.value  # type: ignore[attr-defined]
        a, b = src.span(node)
        return [((a, b, f"-{value + 1}".encode()),)]
    if not _digits(src, node) or _negative(src, src.parent(node) or node):
        return []
    value = node.value  # type: ignore[attr-defined]
    a, b = src.span(node)
    lower = value - 1 if value > 0 else value + 2
    parent = src.parent(node)
    if lower == 0 and ((isinstance(parent, ast.BinOp) and isinstance(parent.op, (ast.Add, ast.Sub)))
                       or (isinstance(parent, ast.Slice) and parent.lower is node)):
        # "n - 0", "[0:]": nobody writes these
        return [((a, b, str(value + 1).encode()),)]
    return [((a, b, str(value + 1).encode()),), ((a, b, str(lower).encode()),)]


def _shift_bound(src: _Source, bound: ast.expr, delta: int, lower: bool) -> bytes | None:
    """``bound`` moved by ``delta``, written as a person would: a literal becomes another
    literal, ``n - 1`` becomes ``n`` or ``n - 2``, a plain name gets `` + 1``; ``None`` for a
    bound that would need parentheses or would give a bound nobody writes (``[0:]``, ``[:-0]``)."""
    if _digits(src, bound):
        value = bound.value + delta  # type: ignore[attr-defined]
        return None if value < 0 or (lower and value == 0) else str(value).encode()
    if _negative(src, bound):
        value = -bound.operand.value + delta  # type: ignore[attr-defined]
        return None if value >= 0 else str(value).encode()
    if isinstance(bound, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)):
        text = src.text(bound)
        if b"\n" in text:
            return None
        return text + (b" + 1" if delta > 0 else b" - 1")
    if isinstance(bound, ast.BinOp) and isinstance(bound.op, (ast.Add, ast.Sub)) and \
            _digits(src, bound.right):
        sign = 1 if isinstance(bound.op, ast.Add) else -1
        value = sign * bound.right.value + delta  # type: ignore[attr-defined]
        left = src.data[src.span(bound)[0]:src.span(bound.left)[1]]
        if b"\n" in left:
            return None
        if value == 0:
            return left
        return left + (b" + " if value > 0 else b" - ") + str(abs(value)).encode()
    return None


def _off_by_one_slice(src: _Source, node: ast.AST) -> list[tuple[tuple[int, int, bytes], ...]]:
    if not isinstance(node, ast.Slice):
        return []
    out = []
    for bound, lower in ((node.lower, True), (node.upper, False)):
        if bound is None:
            continue
        a, b = src.span(bound)
        for delta in (1, -1):
            new = _shift_bound(src, bound, delta, lower)
            if new is not None:
                out.append(((a, b, new),))
    return out


def _invert_condition(src: _Source, node: ast.AST) -> list[tuple[tuple[int, int, bytes], ...]]:
    """Retired: the ``not (...)`` wrapper a grep for ``not (`` finds (see the module docstring)."""
    if not isinstance(node, (ast.If, ast.While, ast.IfExp)):
        return []
    a, b = src.span(node.test)
    return [((a, b, b"not (" + src.data[a:b] + b")"),)]


def _negate_condition(src: _Source, node: ast.AST) -> list[tuple[tuple[int, int, bytes], ...]]:
    """A condition turned into its opposite as a person writes it: the opposite comparison
    operator (``<`` -> ``>=``, ``in`` -> ``not in``), ``not x`` -> ``x``, ``x`` -> ``not x``."""
    if not isinstance(node, (ast.If, ast.While, ast.IfExp)):
        return []
    test = node.test
    a = src.span(test)[0]
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _OPPOSITE:
        gap_a, gap_b = src.span(test.left)[1], src.span(test.comparators[0])[0]
        found = list(_CMP_TEXT.finditer(src.data[gap_a:gap_b]))
        if len(found) != 1:
            return []
        m = found[0]
        return [((gap_a + m.start(), gap_a + m.end(), _OPPOSITE[type(test.ops[0])].encode()),)]
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner_a = src.span(test.operand)[0]
        if isinstance(test.operand, (ast.BoolOp, ast.Compare)) and src.data[inner_a - 1:inner_a] == b"(":
            return []  # "not (a or b)" -> "(a or b)": parentheses nobody would leave
        return [((a, inner_a, b""),)]
    if isinstance(test, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)):
        return [((a, a, b"not "),)]
    return []


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
    if isinstance(node.body[-1], (ast.Return, ast.Raise, ast.Continue, ast.Break)) or all(
            isinstance(s, ast.Pass) for s in node.body):
        return []  # the code after it would be dead, or nothing would change
    span = src.whole_lines(node)
    body = _dedent_body(src, node)
    if span is None or body is None:
        return []
    return [((span[0], span[1], body),)]


def _with_comments(src: _Source, start: int, end: int) -> tuple[int, int]:
    """``[start, end)`` (whole lines) grown by the comment lines directly above it (they
    describe the statement: a dropped statement takes them along) and, when blank lines then
    meet, by one of those blank lines."""
    line = bisect.bisect_left(src.starts, start)  # 0-based index of the first line
    while line > 0:
        above = src.data[src.starts[line - 1]:src.starts[line]]
        if not above.strip().startswith(b"#"):
            break
        line -= 1
    start = src.starts[line]
    before = src.data[src.starts[line - 1]:start] if line > 0 else b"x"
    after_end = src.data.find(b"\n", end)
    after = src.data[end:after_end + 1 if after_end >= 0 else len(src.data)]
    if not before.strip() and not after.strip() and after:
        end += len(after)
    return start, end


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
                a, b = _with_comments(src, *span)
                out.append(((a, b, b""),))
    return out


def _drop_statement(src: _Source, node: ast.AST) -> list[tuple[tuple[int, int, bytes], ...]]:
    return _drop_from_body(src, node, (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign))


def _drop_loop(src: _Source, node: ast.AST) -> list[tuple[tuple[int, int, bytes], ...]]:
    return _drop_from_body(src, node, (ast.For, ast.While))


#: Calls whose arguments have fixed kinds: swapping them gives code no release ships.
_FIXED_KINDS = frozenset({"isinstance", "issubclass", "getattr", "setattr", "hasattr", "delattr",
                          "format", "join", "split", "replace", "startswith", "endswith", "get",
                          "setdefault", "pop", "insert", "append", "extend", "print", "open",
                          "range", "enumerate", "zip", "map", "filter", "sorted", "super", "cast",
                          "partial", "warn", "sub", "match", "search", "compile", "findall"})


def _plain(node: ast.expr) -> bool:
    """A variable a person could pass in the wrong place: a lower-case name or attribute (a
    capitalised one is a class, a literal has an obvious place)."""
    if isinstance(node, ast.Name):
        return not node.id[:1].isupper()
    if isinstance(node, ast.Attribute):
        return not node.attr[:1].isupper() and _plain(node.value) if isinstance(
            node.value, (ast.Name, ast.Attribute)) else False
    return False


def _swap_arguments(src: _Source, node: ast.AST) -> list[tuple[tuple[int, int, bytes], ...]]:
    if not isinstance(node, ast.Call) or len(node.args) < 2:
        return []
    func = node.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    if name in _FIXED_KINDS:
        return []
    x, y = node.args[0], node.args[1]
    if not (_plain(x) and _plain(y)) or ast.dump(x) == ast.dump(y):
        return []
    (xa, xb), (ya, yb) = src.span(x), src.span(y)
    return [((xa, xb, src.data[ya:yb]), (ya, yb, src.data[xa:xb]))]


def _returns_none(func: ast.AST | None) -> bool:
    """Whether ``func`` has a ``return`` or ``return None`` of its own (not a nested function's)."""
    if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    todo: list[ast.AST] = list(func.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Return) and (node.value is None or (
                isinstance(node.value, ast.Constant) and node.value.value is None)):
            return True
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(node))
    return False


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
        if _digits(src, value):
            return [((a, b, str(value.value + 1).encode()),)]
    # "return None" only where the function already means "nothing" by returning None
    return [((a, b, b"None"),)] if _returns_none(src.func) else []


#: The operators, in a fixed order (a task's ``operator`` names one of these).
OPERATORS: dict[str, Finder] = {
    "flip_compare": _flip_compare,
    "flip_boolean": _flip_boolean,
    "off_by_one_constant": _off_by_one_constant,
    "off_by_one_slice": _off_by_one_slice,
    "invert_condition": _invert_condition,
    "negate_condition": _negate_condition,
    "drop_condition": _drop_condition,
    "drop_statement": _drop_statement,
    "drop_loop": _drop_loop,
    "swap_arguments": _swap_arguments,
    "change_return": _change_return,
}


#: Operators kept only so that older records can be reproduced; :func:`sites` skips them unless
#: asked by name.
RETIRED = ("invert_condition",)

#: What synthesis uses by default.
ACTIVE = tuple(name for name in OPERATORS if name not in RETIRED)


def sites(source: bytes, operators: tuple[str, ...] | None = None) -> list[Site]:
    """Every site of ``operators`` (default: :data:`ACTIVE`) in ``source``, in a fixed order."""
    unknown = set(operators or ()) - set(OPERATORS)
    if unknown:
        raise ConfigError(f"unknown bug operators {sorted(unknown)}; known: {sorted(OPERATORS)}")
    tree = ast.parse(source)
    src = _Source(source)
    src.index(tree)
    counts: dict[str, int] = {}
    out = []
    for func, node in _function_bodies(tree):
        if node is not func and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue  # a nested definition's body belongs to its own function
        first = min([d.lineno for d in func.decorator_list] + [func.lineno])
        src.func = func
        for name in operators or ACTIVE:
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
                raise PatchError(f"{operator} site {index} gives no valid, different module")
            return site, mutated
    raise PatchError(f"{operator} has no site {index} in this module")
