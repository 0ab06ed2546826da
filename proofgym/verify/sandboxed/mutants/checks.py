"""Reading a test's checks from its AST: asserts (and unittest's ``self.assert*`` as asserts), the
expected side of an equality, ``pytest.raises`` blocks, the pure values a test builds, and whether
a statement runs. The value model (:mod:`.values`) and the mutator (:mod:`.mutator`) read tests
through these.
"""

from __future__ import annotations

import ast
import functools
import unittest
from collections.abc import Iterator, Mapping

from proofgym.verify.sandboxed.mutants.listing import _base_name, _clone, _parameters

_RAISES = ("raises",)


def _plain(func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A test without decorators and without parameters (fixtures) other than ``self``."""
    args = func.args
    params = [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]]
    return not func.decorator_list and params in ([], ["self"]) and args.vararg is None and \
        args.kwarg is None and isinstance(func, ast.FunctionDef)


def _constants(node: ast.AST) -> list[ast.Constant]:
    return [n for n in ast.walk(node) if isinstance(n, ast.Constant)]


def _imported(tree: ast.Module) -> set[str]:
    """Names bound by the module's imports and function definitions (``pytest`` excluded)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module != "pytest":
            names |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.Import):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names} - {"pytest"}
    return names


def _pure_env(body: list[ast.stmt], imported: set[str]) -> dict[str, ast.expr]:
    """Names assigned exactly once, at the top of ``body``, to a pure value and only read in
    ways that cannot change what they hold (as arguments of imported functions, compared, or
    attributes read; never a method called on them, an item or attribute set, or a local
    function given them): name -> the assigned node itself (so a leaf changed through a view
    changes the test). A view of ``cache.evictions`` after ``cache.put(...)`` would be wrong."""
    counts: dict[str, int] = {}
    parents: dict[int, ast.AST] = {}
    for node in body:
        for sub in ast.walk(node):
            for child in ast.iter_child_nodes(sub):
                parents[id(child)] = sub
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                counts[sub.id] = counts.get(sub.id, 0) + 1
    unsafe = {sub.id for node in body for sub in ast.walk(node)
              if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load)
              and not _harmless_read(sub, parents, imported)}
    env: dict[str, ast.expr] = {}
    for node in body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name) and counts.get(node.targets[0].id) == 1 and \
                node.targets[0].id not in unsafe and _view(node.value, imported, env) is not None:
            env[node.targets[0].id] = node.value
    return env


def _harmless_read(name: ast.Name, parents: Mapping[int, ast.AST], imported: set[str]) -> bool:
    parent = parents.get(id(name))
    if isinstance(parent, ast.keyword):
        parent = parents.get(id(parent))
        return isinstance(parent, ast.Call) and _callee_ok(parent.func, imported)
    if isinstance(parent, ast.Call):
        return name is not parent.func and _callee_ok(parent.func, imported)
    if isinstance(parent, ast.Compare):
        return True
    if isinstance(parent, (ast.Attribute, ast.Subscript)) and parent.value is name:
        above = parents.get(id(parent))
        return isinstance(parent.ctx, ast.Load) and not (isinstance(above, ast.Call) and above.func is parent)
    return False


def _view(node: ast.expr, imported: set[str], env: Mapping[str, ast.expr]) -> ast.expr | None:
    """``node`` with the names of ``env`` replaced by their values, sharing the leaves with the
    test (a new node only where a name was replaced above it), or None when it is not a pure
    value: literals, calls of imported names (or their attributes, or methods of a pure value)
    on pure values, and attributes or items of pure values."""
    if isinstance(node, ast.Constant):
        return node
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        operand = _view(node.operand, imported, env)
        return None if operand is None else (node if operand is node.operand else
                                             ast.UnaryOp(op=node.op, operand=operand))
    if isinstance(node, ast.Name):
        if node.id in env:
            return _view(env[node.id], imported, {k: v for k, v in env.items() if k != node.id})
        return None
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        elts = [_view(e, imported, env) for e in node.elts]
        if any(e is None for e in elts):
            return None
        if all(a is b for a, b in zip(elts, node.elts, strict=True)):
            return node
        return ast.Set(elts=elts) if isinstance(node, ast.Set) else type(node)(elts=elts, ctx=ast.Load())
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            return None
        keys = [_view(k, imported, env) for k in node.keys]  # type: ignore[arg-type]
        values = [_view(v, imported, env) for v in node.values]
        if any(x is None for x in [*keys, *values]):
            return None
        return ast.Dict(keys=keys, values=values)
    if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
        value = _view(node.value, imported, env)
        if value is None or not isinstance(value, (ast.Call, ast.Attribute, ast.Subscript)):
            return None  # an attribute of a call's result, not of a module
        return ast.Attribute(value=value, attr=node.attr, ctx=ast.Load())
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and \
            isinstance(node.slice, ast.Constant):
        value = _view(node.value, imported, env)
        return None if value is None else ast.Subscript(value=value, slice=node.slice, ctx=ast.Load())
    if isinstance(node, ast.Call) and not any(isinstance(a, ast.Starred) for a in node.args) and \
            all(k.arg is not None for k in node.keywords):
        if _callee_ok(node.func, imported):
            func = node.func
        elif isinstance(node.func, ast.Attribute):  # a method of a pure value
            inner = _view(node.func.value, imported, env)
            if inner is None or not isinstance(inner, (ast.Call, ast.Attribute, ast.Subscript)):
                return None
            func = ast.Attribute(value=inner, attr=node.func.attr, ctx=ast.Load())
        else:
            return None
        args = [_view(a, imported, env) for a in node.args]
        kws = [_view(k.value, imported, env) for k in node.keywords]
        if any(x is None for x in [*args, *kws]):
            return None
        return ast.Call(func=func, args=args,
                        keywords=[ast.keyword(arg=k.arg, value=v)
                                  for k, v in zip(node.keywords, kws, strict=True)])
    return None


def _callee_ok(func: ast.expr, imported: set[str]) -> bool:
    """An imported function or class, or an attribute of one (``Version.parse``)."""
    while isinstance(func, ast.Attribute):
        func = func.value
    return isinstance(func, ast.Name) and func.id in imported


def _skeleton(node: ast.expr) -> str:
    """The expression with each constant reduced to its type: calls with the same skeleton
    differ in their literal inputs only."""
    blank = _clone(node)
    for sub in ast.walk(blank):
        if isinstance(sub, ast.Constant):
            sub.value = type(sub.value).__name__
    return ast.dump(blank, annotate_fields=False, include_attributes=False)


def _raises_type(node: ast.AST) -> str | None:
    call = _raises_call(node) if isinstance(node, ast.withitem) else None
    if call is not None and call.args and isinstance(call.args[0], ast.Name):
        return call.args[0].id
    return None


def _raises_call(item: ast.withitem) -> ast.Call | None:
    call = item.context_expr
    if isinstance(call, ast.Call):
        func = call.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if name in _RAISES:
            return call
    return None


def _running(body: list[ast.stmt], module: ast.Module | None,
             loops: tuple[tuple[str, ast.expr], ...] = ()
             ) -> Iterator[tuple[ast.stmt, tuple[tuple[str, ast.expr], ...]]]:
    """The statements of ``body`` that run whenever it does, with the loops they are in (loop
    variable, the literal iterated over): direct statements, and those of loops over a non-empty
    literal or ``range`` (or a name bound to a non-empty literal at the top of the module)."""
    for stmt in body:
        if _may_leave(stmt):  # ``if x: return`` (or ``break``): what follows may not run
            return
        yield stmt, loops
        if isinstance(stmt, ast.For) and not stmt.orelse:
            source = _loop_source(stmt.iter, module)
            if source is not None:
                inner = loops
                if isinstance(stmt.target, ast.Name) and isinstance(source, (ast.List, ast.Tuple)):
                    inner = (*loops, (stmt.target.id, source))
                yield from _running(stmt.body, module, inner)


def _may_leave(stmt: ast.stmt) -> bool:
    """Whether ``stmt`` can end its function or loop early (a ``return``, ``yield``, ``break``
    or ``continue`` in it, outside nested functions and classes)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return False  # defining a function runs none of it
    todo: list[ast.AST] = [stmt]
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Return, ast.Yield, ast.YieldFrom, ast.Break, ast.Continue)):
            return True
        todo += [c for c in ast.iter_child_nodes(node) if not isinstance(
            c, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef))]
    return False


def _loop_source(iterable: ast.expr, module: ast.Module | None) -> ast.expr | None:
    if isinstance(iterable, ast.Name) and module is not None:
        name = iterable.id  # (the last top-level assignment of the name wins, as at run time)
        for node in module.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                    isinstance(node.targets[0], ast.Name) and node.targets[0].id == name:
                iterable = node.value
    if isinstance(iterable, (ast.List, ast.Tuple)) and iterable.elts:
        return iterable
    if isinstance(iterable, ast.Constant) and isinstance(iterable.value, str) and iterable.value:
        return iterable
    return iterable if _runs(iterable) else None


def _leaf_values(root: ast.expr) -> list[tuple[object, ast.Constant]]:
    parents = {id(c): p for p in ast.walk(root) for c in ast.iter_child_nodes(p)}
    out = []
    for leaf in ast.walk(root):
        if isinstance(leaf, ast.Constant) and isinstance(leaf.value, (bool, int, float, str, bytes)):
            parent = parents.get(id(leaf))
            negative = isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.USub)
            value = -leaf.value if negative and isinstance(leaf.value, (int, float)) else leaf.value
            out.append((value, leaf))
    return out


def _prefix_literals(test: ast.expr) -> list[ast.expr]:
    """The literal argument of ``x.startswith("...")`` / ``endswith``: no string starts with two
    different prefixes of the same length."""
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute) and \
            test.func.attr in ("startswith", "endswith") and len(test.args) == 1 and \
            not test.keywords and isinstance(test.args[0], ast.Constant) and \
            isinstance(test.args[0].value, (str, bytes)) and test.args[0].value:
        return [test.args[0]]
    return []


def _runs(iterable: ast.expr) -> bool:
    if isinstance(iterable, (ast.List, ast.Tuple)):
        return bool(iterable.elts)
    if isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name) and \
            iterable.func.id == "range" and not iterable.keywords and 1 <= len(iterable.args) <= 3:
        try:
            return len(range(*(ast.literal_eval(a) for a in iterable.args))) > 0
        except (ValueError, TypeError):
            return False
    return False


def _is_literal(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return isinstance(node.operand, ast.Constant) and isinstance(node.operand.value, (int, float))
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return all(_is_literal(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is not None and _is_literal(k) for k in node.keys) and \
            all(_is_literal(v) for v in node.values)
    return False


#: unittest assertions that hold when their first two arguments are equal
_UNITTEST_EQUAL = frozenset({"assertEqual", "assertEquals", "assertListEqual", "assertTupleEqual",
                             "assertDictEqual", "assertSetEqual", "assertSequenceEqual",
                             "assertMultiLineEqual", "assertAlmostEqual", "assertAlmostEquals"})
#: every assertion ``unittest.TestCase`` defines (a project's own ``self.assert*`` is none of them)
_UNITTEST_NAMES = frozenset(n for n in dir(unittest.TestCase) if n.startswith(("assert", "fail")))


def _as_assert(stmt: ast.stmt) -> ast.Assert | None:
    """The check a statement makes, as an ``assert`` whose operands *are* the statement's nodes
    (a leaf changed through it changes the statement): an ``assert`` itself;
    ``self.assertEqual(a, b)`` and its equality kin as ``assert a == b``; ``self.assertTrue(x)``
    / ``assertFalse(x)`` as ``assert x`` / ``assert not x``; and a project's own
    ``self.assertX(a, b, ...)`` (one ``unittest.TestCase`` does not define, such as markdown's
    ``assertMarkdownRenders(source, expected)``) as ``assert a == b``: a mutant of it that
    correct code still passes fails the synthesis gate (the reference fix must score 1), so a
    helper that is no equality costs a task, never a wrong verdict. Else ``None``."""
    if isinstance(stmt, ast.Assert):
        return stmt
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return None
    call = stmt.value
    func = call.func
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
            and func.value.id == "self" and func.attr.startswith("assert")) or \
            any(isinstance(a, ast.Starred) for a in call.args):
        return None
    args, name = call.args, func.attr
    test: ast.expr
    if name in ("assertTrue", "assert_") and args:
        test = args[0]
    elif name == "assertFalse" and args:
        test = ast.UnaryOp(op=ast.Not(), operand=args[0])
    elif len(args) >= 2 and (name in _UNITTEST_EQUAL or name not in _UNITTEST_NAMES):
        test = ast.Compare(left=args[0], ops=[ast.Eq()], comparators=[args[1]])
    else:
        return None
    return ast.copy_location(ast.Assert(test=test, msg=None), stmt)


def _case_expected(func: ast.FunctionDef | ast.AsyncFunctionDef, asserts: list[ast.Assert]
                   ) -> list[ast.expr]:
    """In a parametrized test's cases, the values of the parameters an unconditional
    ``assert <computed> == <parameter>`` compares with (``expected`` in ``(x, expected)``):
    changing one case's makes correct code fail that case, so the test (all its cases in one
    process) fails. A parameter that also feeds the computed side is an input, never changed."""
    out: list[ast.expr] = []
    for names, cases in _parameters(func):
        wanted = set()
        for a in asserts:
            sides = _eq_sides(a.test)
            for side, other in zip(sides, reversed(sides), strict=True):
                read = {n.id for n in ast.walk(other) if isinstance(n, ast.Name)}
                if isinstance(side, ast.Name) and side.id in names and side.id not in read:
                    wanted.add(names.index(side.id))
        for case in cases:
            if isinstance(case, ast.Call) and _base_name(case.func) == "param":
                values = case.args  # pytest.param(x, expected, id=...)
            elif len(names) == 1:
                values = [case]
            elif isinstance(case, (ast.Tuple, ast.List)):
                values = case.elts
            else:
                continue
            if len(values) == len(names):
                out += [values[i] for i in sorted(wanted) if _is_expected(values[i])]
    return out


def _dedent(node: ast.expr) -> bool:
    """``dedent("...")`` / ``self.dedent("...")``: a literal text, reformatted."""
    return isinstance(node, ast.Call) and _base_name(node.func) == "dedent" and \
        len(node.args) == 1 and not node.keywords and isinstance(node.args[0], ast.Constant) and \
        isinstance(node.args[0].value, str)


def _eq_sides(test: ast.expr) -> list[ast.expr]:
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
        return [test.left, test.comparators[0]]
    return []


def _is_expected(node: ast.expr, names: frozenset[str] | set[str] = frozenset()) -> bool:
    """A literal, or a value built from literals only (``[date(2024, 1, 31)]``, ``Decimal("1.5")``);
    inside a container, ``names`` (imported constants such as ``USER_AGENT``) count as fixed
    values too."""
    return _expected(node, names, top=True)


def _expected(node: ast.expr, names: frozenset[str] | set[str], top: bool) -> bool:
    if _is_literal(node):
        return True
    if isinstance(node, ast.Name):
        return not top and node.id in names
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return all(_expected(e, names, False) for e in node.elts) and \
            (not top or any(isinstance(n, ast.Constant) for n in ast.walk(node)))
    if isinstance(node, ast.Dict):
        return all(k is not None and _expected(k, names, False) for k in node.keys) and \
            all(_expected(v, names, False) for v in node.values) and \
            (not top or any(isinstance(n, ast.Constant) for n in ast.walk(node)))
    if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)):
        return bool(node.args or node.keywords) and all(_expected(a, names, False) for a in node.args) and \
            all(_expected(k.value, names, False) for k in node.keywords) and \
            any(isinstance(n, ast.Constant) for n in ast.walk(node))
    return False


def _eq_literals(test: ast.expr, names: frozenset[str] | set[str] = frozenset()) -> list[ast.expr]:
    """The expected side of ``assert a == b``: the one side that is a literal, or built from
    literals (and ``names``); when both are, by convention the right one, unless both are
    calls of the same function (``f(1) == f(2)`` says nothing about which one is expected)."""
    sides = _eq_sides(test)
    if len(sides) != 2:
        return []
    for kind in (_is_literal, functools.partial(_is_expected, names=names)):
        if kind(sides[0]) != kind(sides[1]):  # exactly one side is the expected value
            return [s for s in sides if kind(s)]
    if all(isinstance(x, ast.Call) for x in sides) and not all(_dedent(x) for x in sides) and \
            ast.dump(sides[0].func) == ast.dump(sides[1].func):  # type: ignore[attr-defined]
        return []
    return [sides[1]] if _is_expected(sides[1], names) else []


def _eq_names(test: ast.expr) -> list[ast.Name]:
    return [s for s in _eq_sides(test) if isinstance(s, ast.Name)]
