"""Expected values the code under test never sees: hidden asserts rewritten to send, not compare.

A hidden test runs in the same process as the code under test, which can read the test's file,
its function's constants and its frames. Where a test compares a computed value with a literal
(``assert f(x) == "pho-bo"``, ``"pho-bo" == f(x)``, ``!=``, ``<``..., ``in``/``not in`` a literal
container, ``is None``/``is True``, ``== pytest.approx(0.5)``, ``self.assertEqual(f(x), 3)`` and
its unittest kin), the code could read the expected value and judge it: return it where it looks
like the real test's, leave a mutant's implausible value to the bug (a language model can tell).

Before a grading's test files enter the sandbox, :func:`withhold_layout` rewrites each such
assert of a hidden test, on the host, into ``__proofgym_observe__(site, computed)``: the test
process records the computed value (plain data only: builtin values, no object whose comparison
methods are its own) and sends the record with its proof of a finished test
(``proofgym/programs/pytest_runner.py``). The literal stays here, in an :class:`Expectation`;
the host compares (:mod:`proofgym.verify.sandboxed.observed`). A withheld assert does not stop
its test (the test process cannot know whether it holds): a test passes only if its process
passed, its checks were observed in a sequence its statements make (the *pattern*) and every
value holds against its literal. A passed test whose checks were not observed so ran something
other than its own statements: tampering. Code under test can send observations of its own (it
shares the process), but to pass it would have to send the expected value, which it cannot see.

What the pattern pins, so that no forger skips a withheld check unseen: statements of the test
function's own body, of ``with`` blocks other than ``pytest.raises``-like ones and of
``try``/``finally`` bodies, once each; a ``for`` loop (no jump inside) over an iterable the
host evaluates (:mod:`proofgym.verify.sandboxed.counted`: a literal, ``range`` of literals, a
module *table*: a name bound once to a literal and never rebound, shadowed, changed in place
or handed to other code in the file, and ``zip``, ``enumerate``, ``sorted``, ``.items()``...
of such), exactly that many times: the count comes from the host, so a run whose
``zip`` or table was patched observes too little and fails. A ``for`` loop over a computed
iterable (:class:`Repeat`): its body's checks once per iteration, and at least once (no
iteration fails the test). An ``if``/``else`` (``elif`` chains with a final ``else``,
:class:`Choice`): exactly one branch's checks. A loop the run counts and a branch are withheld
only if every iteration and every branch observes a *binding* check (``==``, ``in``,
``approx``, ``almost``: one a value the forger cannot see does not meet at random, as it meets
``!=`` or ``<``, or ``is None`` by a guess), so the forger must still match an unseen literal
however it steers. Never withheld: an ``if``
without ``else`` (the forger could skip it), a ``try`` with handlers, a loop with ``break``,
``continue``, ``raise`` or ``try`` inside, a ``while``, a helper, and checks against anything
but a literal (``[Interval(1, 7)]``, a helper's result, ``parametrize`` data, a table's row):
they keep their expected values in the file and the mutants cover them. What steering cannot
be stopped is the test's own weakness, withheld or not: code under test that makes a computed
iterable yield only the inputs it gets right, or takes the branch where its bug does not show,
passes that test as it would with the literal in the file.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from proofgym.verify.sandboxed.counted import iterations, tables
from proofgym.verify.sandboxed.counted import literal as _literal
from proofgym.verify.sandboxed.mutants import Layout
from proofgym.verify.sandboxed.mutants.listing import ast_work
from proofgym.verify.sandboxed.observed import (
    Choice,
    Item,
    Repeat,
    checks_of,
    decode,
    encode,
    judge,
    unplain,
    verdicts,
)

__all__ = ["OBSERVE", "Choice", "Expectation", "Repeat", "checks_of", "decode", "encode", "judge",
           "unplain", "verdicts", "withhold_layout", "withhold_source"]

#: The builtin the rewritten asserts call (the runner installs it in each test process).
OBSERVE = "__proofgym_observe__"
#: A literal whose encoding is larger than this stays in the test: an observed value is sent
#: only up to ``runner.MAX_OBSERVED`` (16 times as much) and counts as different beyond it.
MAX_LITERAL = 16_384

_OPS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
        ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not"}
#: unittest assertions: name -> (op, the literal's argument positions it may take)
_UNITTEST = {"assertEqual": ("==", (0, 1)), "assertEquals": ("==", (0, 1)),
             "assertNotEqual": ("!=", (0, 1)), "assertIn": ("in", (1,)),
             "assertNotIn": ("not in", (1,)), "assertIs": ("is", (0, 1)),
             "assertIsNot": ("is not", (0, 1)), "assertGreater": (">", (1,)),
             "assertGreaterEqual": (">=", (1,)), "assertLess": ("<", (1,)),
             "assertLessEqual": ("<=", (1,)), "assertAlmostEqual": ("almost", (0, 1))}
_RAISES = {"raises", "warns", "deprecated_call", "assertRaises", "assertRaisesRegex",
           "assertWarns", "assertWarnsRegex", "suppress"}


@dataclass(frozen=True)
class Expectation:
    """One withheld check, ``site`` in its test: ``observed OP expected`` (the literal on the
    left when ``literal_left``); ``op`` also ``approx``/``not approx`` (``rel``, ``abs`` as in
    ``pytest.approx``) and ``almost`` (unittest's ``places``/``delta``). ``line`` is the
    assert's line in the source it was withheld from."""

    op: str
    expected: object
    site: int
    line: int
    literal_left: bool = False
    rel: float | None = None
    abs: float | None = None
    places: int | None = None
    delta: float | None = None
    #: the computed side's source (``ast.unparse``): what names the check in a task's
    #: ``unwithheld`` list (:func:`withhold_source`'s ``keep``) and in ``TestRun.unplain``
    computed: str = ""


def _encoded_size(value: object) -> int | None:
    try:
        return len(json.dumps(encode(value)))
    except (TypeError, ValueError, RecursionError):
        return None


def _approx(node: ast.expr, names: set[str]) -> dict | None:
    """``pytest.approx(literal, rel=..., abs=...)``: its keywords and the literal, else None."""
    if not isinstance(node, ast.Call) or len(node.args) != 1:
        return None
    func = node.func
    if not ((isinstance(func, ast.Attribute) and func.attr == "approx"
             and isinstance(func.value, ast.Name) and func.value.id == "pytest")
            or (isinstance(func, ast.Name) and func.id in names)):
        return None
    ok, value = _literal(node.args[0])
    if not ok:
        return None
    out: dict = {"expected": value}
    for kw in node.keywords:
        if kw.arg not in ("rel", "abs"):
            return None
        ok, tol = _literal(kw.value)
        if not ok or not isinstance(tol, (int, float)) or isinstance(tol, bool):
            return None
        out[kw.arg] = float(tol)
    return out


def _check(test: ast.expr, names: set[str]) -> tuple[ast.expr, dict] | None:
    """(the computed side, what the Expectation holds) for a withholdable ``assert`` test."""
    if not isinstance(test, ast.Compare) or len(test.ops) != 1 or type(test.ops[0]) not in _OPS:
        return None
    op = _OPS[type(test.ops[0])]
    left, right = test.left, test.comparators[0]
    if op in ("==", "!="):
        for approx, other in ((right, left), (left, right)):  # approx is symmetric
            found = _approx(approx, names)
            if found is not None and _approx(other, names) is None and not _literal(other)[0]:
                kind = "approx" if op == "==" else "not approx"
                return other, {"op": kind, **found}
    lit_right, right_value = _literal(right)
    lit_left, left_value = _literal(left)
    if lit_right == lit_left:  # nothing computed, or no literal to withhold
        return None
    if op in ("is", "is not"):
        value = right_value if lit_right else left_value
        if not (value is None or value is True or value is False):
            return None
        return (left if lit_right else right), {"op": op, "expected": value}
    if op in ("in", "not in"):
        if not lit_right:  # a literal in a computed container: the answer is what is withheld
            answer = ast.Compare(left, [ast.In()], [right])
            return answer, {"op": "is", "expected": op == "in"}
        return left, {"op": op, "expected": right_value}
    if lit_right:
        return left, {"op": op, "expected": right_value}
    return right, {"op": op, "expected": left_value, "literal_left": True}


def _unittest_check(call: ast.Call) -> tuple[ast.expr, dict] | None:
    func = call.func
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
            and func.value.id == "self") or (func.attr not in _UNITTEST and
                                             func.attr not in ("assertIsNone", "assertIsNotNone")):
        return None
    if any(isinstance(a, ast.Starred) for a in call.args):
        return None
    keywords = {kw.arg: kw.value for kw in call.keywords}
    if None in keywords:
        return None
    if func.attr in ("assertIsNone", "assertIsNotNone"):
        if len(call.args) not in (1, 2) or set(keywords) - {"msg"}:
            return None
        return call.args[0], {"op": "is" if func.attr == "assertIsNone" else "is not",
                              "expected": None}
    op, positions = _UNITTEST[func.attr]
    allowed = {"msg", "places", "delta"} if op == "almost" else {"msg"}
    if len(call.args) < 2 or set(keywords) - allowed or \
            len(call.args) > (2 if op == "almost" and {"places", "delta"} & set(keywords) else 3):
        return None
    extra: dict = {}
    if op == "almost":
        if len(call.args) == 3:  # assertAlmostEqual(first, second, places)
            keywords["places"] = call.args[2]
        for name in ("places", "delta"):
            if name in keywords:
                ok, value = _literal(keywords[name])
                if not ok or (value is not None and not isinstance(value, (int, float))):
                    return None
                extra[name] = value
        if extra.get("places") is None and extra.get("delta") is None:
            extra["places"] = 7
    lits = [_literal(call.args[i]) for i in (0, 1)]
    if lits[0][0] == lits[1][0]:
        return None
    at = 0 if lits[0][0] else 1
    if at not in positions:
        return None
    value = lits[at][1]
    if op in ("is", "is not") and not (value is None or value is True or value is False):
        return None
    if op in ("<", "<=", ">", ">=", "in", "not in") and at == 0:
        return None
    return call.args[1 - at], {"op": op, "expected": value, "literal_left": at == 0 and
                               op in ("==", "!="), **extra}


def _observe(site: int, computed: ast.expr, like: ast.stmt) -> ast.stmt:
    call = ast.Call(ast.Name(OBSERVE, ast.Load()), [ast.Constant(site), computed], [])
    return ast.copy_location(ast.Expr(call), like)


@dataclass(frozen=True)
class _Context:
    """What a rewrite of one test knows of its module: the names ``pytest.approx`` is imported
    as, and its tables (names bound once, to a literal, and never rebound or changed)."""

    approx: set[str]
    tables: dict[str, object]
    keep: frozenset[str] = frozenset()


def _rewrite_body(body: list[ast.stmt], ctx: _Context, sites: list[Expectation]
                  ) -> list[Item]:
    """Rewrite the withholdable checks of ``body`` (statements that run once each when it
    runs to its end); returns the pattern a passing run observes (:mod:`.observed`)."""
    order: list[Item] = []
    for i, stmt in enumerate(body):
        check = None
        if isinstance(stmt, ast.Assert):
            check = _check(stmt.test, ctx.approx)
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            check = _unittest_check(stmt.value)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)) and not any(_raises_like(w.context_expr)
                                                                     for w in stmt.items):
            order += _rewrite_body(stmt.body, ctx, sites)
        elif isinstance(stmt, ast.Try) and not stmt.handlers and not stmt.orelse:
            # try/finally: the body runs to its end or the test fails; the finally block runs
            order += _rewrite_body(stmt.body, ctx, sites)
            order += _rewrite_body(stmt.finalbody, ctx, sites)
        elif isinstance(stmt, ast.For) and not _jumps(stmt.body):
            times = iterations(stmt.iter, ctx.tables)
            if times is not None:
                inner = _rewrite_body(stmt.body, ctx, sites)
                order += inner * times + _rewrite_body(stmt.orelse, ctx, sites)
            else:  # counted by the run: withheld only if each iteration binds the forger
                inner = _tentatively(stmt, ("body",), ctx, sites)
                if inner is not None:
                    order += [Repeat(tuple(inner[0])), *_rewrite_body(stmt.orelse, ctx, sites)]
        elif isinstance(stmt, ast.If) and stmt.orelse:
            branches = _tentatively(stmt, ("body", "orelse"), ctx, sites)
            if branches is not None:
                order.append(Choice(tuple(tuple(b) for b in branches)))
        if check is None:
            continue
        computed, fields = check
        size = _encoded_size(fields["expected"])
        if size is None or size > MAX_LITERAL:
            continue
        text = ast.unparse(computed)
        if text in ctx.keep:  # its value is no plain data: it stays an assert (see withhold_source)
            continue
        sites.append(Expectation(site=len(sites), line=stmt.lineno, computed=text, **fields))
        order.append(sites[-1])
        body[i] = _observe(sites[-1].site, computed, stmt)
    return order


#: Checks an unseen value must be matched for (a random value meets ``!=``, ``not in``, ``<``; a
#: guess among None, True and False meets ``is``).
_BINDING = {"==", "in", "approx", "almost"}


def _binds(pattern: list[Item] | tuple[Item, ...]) -> bool:
    """Whether every run that observes ``pattern`` observes a binding check (one whose literal
    the forger must match): what makes a branch or a counted-by-the-run loop unskippable."""
    for item in pattern:
        if isinstance(item, Choice):
            if all(_binds(a) for a in item.alternatives):
                return True
        elif isinstance(item, Repeat):
            if _binds(item.body):
                return True
        elif item.op in _BINDING:
            return True
    return False


def _tentatively(stmt: ast.stmt, fields: tuple[str, ...], ctx: _Context,
                 sites: list[Expectation]) -> list[list[Item]] | None:
    """Rewrite the blocks ``fields`` of ``stmt`` (a loop's body, an ``if``'s two branches) if
    each binds (:func:`_binds`); else leave ``stmt`` and ``sites`` as they were (``None``): a
    branch or loop the forger could steer past without meeting a withheld literal keeps its
    literals in the file, where mutants cover them."""
    blocks = [copy.deepcopy(getattr(stmt, f)) for f in fields]
    mark = len(sites)
    patterns = [_rewrite_body(block, ctx, sites) for block in blocks]
    if not all(_binds(p) for p in patterns):
        del sites[mark:]
        return None
    for name, block in zip(fields, blocks, strict=True):
        setattr(stmt, name, block)
    return patterns


def _jumps(body: list[ast.stmt]) -> bool:
    """Whether the loop body can end an iteration early or leave the loop (not counting
    nested functions and classes)."""
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Break, ast.Continue, ast.Return, ast.Yield, ast.YieldFrom,
                             ast.Raise, ast.Try)):
            return True
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))
    return False


def _raises_like(node: ast.expr) -> bool:
    func = node.func if isinstance(node, ast.Call) else node
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name in _RAISES


def _approx_names(module: ast.Module) -> set[str]:
    return {a.asname or a.name for n in module.body if isinstance(n, ast.ImportFrom)
            and n.module == "pytest" for a in n.names if a.name == "approx"}


def withhold_source(source: bytes | str, function: str, cls: str | None = None,
                    keep: Collection[str] = ()) -> tuple[bytes, list[Item]]:
    """``source`` with the withholdable asserts of test ``[cls.]function`` rewritten, and the
    pattern a passing run observes (:mod:`.observed`: the checks in order, a check in a loop over
    a literal once per iteration, :class:`Choice` and :class:`Repeat` for branches and loops the
    run decides); the source unchanged (and ``[]``) when none is (:func:`checks_of` lists the
    checks).

    ``keep``: checks (by their computed side's source, ``Expectation.computed``) that stay
    ordinary asserts, with their literal in the file and mutants to cover them, as every check
    that cannot be withheld. A task lists there the checks whose computed value its reference
    fix makes an object that is no plain data (hyperframe's ``Flags``, a set-like class equal
    to a set literal; an enum; a class with its own ``__eq__``): the test process cannot send
    such a value, and the host cannot compare it without running its own ``__eq__``, which is
    code under test. Comparing it in the sandbox would hand the literal to that code; turning
    it into plain data (iterating it, reading its fields) would judge by other rules than the
    test's ``==`` and pass a bug in ``__eq__``; so such a check is not withheld. The list comes
    from the task's trusted record, never from a run of the code under test, so a forger cannot
    unwithhold a check by returning an object (its value fails the check, as before)."""
    with ast_work():
        module = ast.parse(source)
        body = module.body
        if cls is not None:
            body = next((n.body for n in body if isinstance(n, ast.ClassDef) and n.name == cls), [])
        func = next((n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                     and n.name == function), None)
        if func is None:
            return source if isinstance(source, bytes) else source.encode(), []
        if _returns(func):  # checks after an early return would never be observed
            return source if isinstance(source, bytes) else source.encode(), []
        order = _rewrite_body(func.body, _Context(_approx_names(module), tables(module),
                                                  frozenset(keep)), [])
        if not order:
            return source if isinstance(source, bytes) else source.encode(), []
        return (ast.unparse(ast.fix_missing_locations(module)) + "\n").encode(), order


def _returns(func: ast.AST) -> bool:
    stack = list(ast.iter_child_nodes(func))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Return, ast.Yield, ast.YieldFrom)):
            return True
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))
    return False


def withhold_layout(layout: Layout, files: Iterable[str],
                    keep: Mapping[str, Collection[str]] | None = None) -> dict[str, list[Item]]:
    """Rewrite, in ``layout.files``, the generated tests (real and mutant) of the test files
    ``files`` (the hidden ones); generated test id -> the pattern of its withheld checks.
    ``keep``: real test id -> the checks of it (and of its mutants) that stay asserts
    (:func:`withhold_source`)."""
    files = set(files)
    keep = keep or {}
    withheld: dict[str, list[Item]] = {}
    for gen in layout.run:
        real = layout.real.get(gen) or layout.mutant.get(gen)
        if real is None or real.split("::", 1)[0] not in files:
            continue
        path, *parts = gen.split("::")
        cls, name = (parts[0], parts[1]) if len(parts) == 2 else (None, parts[-1])
        source, found = _withhold_cached(layout.files[path], name, cls,
                                         frozenset(keep.get(real, ())))
        if found:
            layout.files[path] = source
            withheld[gen] = found
    return withheld


#: A grading's generated files differ from the last grading's of the same task only in their
#: fresh names (the function's is in the source): rewritten once, with the name left out.
_DONE: dict[bytes, tuple[bytes, list[Item]]] = {}
_DONE_MAX = 4096
_NAME = b"\0proofgym-test\0"


def _withhold_cached(source: bytes, name: str, cls: str | None, keep: frozenset[str] = frozenset()
                     ) -> tuple[bytes, list[Item]]:
    raw = name.encode()
    if source.count(raw) != 1 or (cls is not None and source.count(cls.encode()) != 1):
        return withhold_source(source, name, cls, keep)
    plain = source.replace(raw, _NAME)
    if cls is not None:
        plain = plain.replace(cls.encode(), _NAME + b"cls")
    key = hashlib.sha256(plain + b"\0".join([b"", *sorted(k.encode() for k in keep)])).digest()
    if key not in _DONE:
        if len(_DONE) >= _DONE_MAX:
            _DONE.pop(next(iter(_DONE)))
        _DONE[key] = withhold_source(source, name, cls, keep)
        if _DONE[key][0].count(raw) != 1:  # the name must come back where it was
            return _DONE.pop(key)
        _DONE[key] = (_DONE[key][0].replace(raw, _NAME), _DONE[key][1])
        if cls is not None:
            _DONE[key] = (_DONE[key][0].replace(cls.encode(), _NAME + b"cls"), _DONE[key][1])
    out, found = _DONE[key]
    if cls is not None:
        out = out.replace(_NAME + b"cls", cls.encode())
    return out.replace(_NAME, raw), found
