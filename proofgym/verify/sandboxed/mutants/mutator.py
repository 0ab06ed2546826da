"""The mutator: :func:`mutate_test` changes one test in place so that code computing the right
values must fail it where the original passes (the kinds, in order, are listed on the function;
none negates an assert).
"""

from __future__ import annotations

import ast
import builtins
import functools
import random
from collections.abc import Callable

from proofgym.verify.sandboxed.mutants.checks import (
    _as_assert,
    _case_expected,
    _constants,
    _eq_literals,
    _eq_names,
    _eq_sides,
    _imported,
    _is_literal,
    _prefix_literals,
    _pure_env,
    _raises_call,
    _running,
    _skeleton,
    _view,
)
from proofgym.verify.sandboxed.mutants.listing import _clone, _is_docstring, ast_work
from proofgym.verify.sandboxed.mutants.values import (
    _NO_KEY,
    MutationPool,
    _candidates,
    _constructible,
    _features,
    _Inputs,
    _key,
    _mutate_pattern,
    _shape_signature,
    _stdlib_values,
    build_pool,
)


def mutate_test(func: ast.FunctionDef | ast.AsyncFunctionDef, rng: random.Random,
                module: ast.Module | None = None, pool: MutationPool | None = None,
                file: str | None = None, witnesses: list[str] | None = None) -> bool:
    """Change ``func`` (and, for a helper-style test, the helper it calls, in ``module``) in place
    so that code computing the right values must fail it where the original passes; False when
    no such mutation is known. No mutation negates an assert.

    ``pool`` describes the task's tests (:func:`build_pool`; by default ``module`` alone):
    replacement values are drawn from the values of the same kind seen there. In order of
    preference:

    1. an expected value: one leaf of the expected side of an ``==`` (or the prefix of a
       ``startswith``) in an assert that runs unconditionally (in the test, in a loop over a
       non-empty literal, or in a same-file helper the test calls), or of a literal assigned to a
       name only that comparison reads. The new leaf keeps the old one's kind, sign, digit
       count, float repr length, string length and per-character classes, whether it occurs in
       the test's inputs, and the order and distinctness of the container it sits in;
    2. for ``pytest.raises`` tests: the raising call's literal inputs replaced by those of the
       same call that another test shows returning (so it no longer raises), or the ``match=``
       pattern changed in every alternative, or (a builtin exception only) the type swapped for
       an unrelated builtin one; for ``assert f(...)`` / ``assert not f(...)`` the arguments of
       an opposite-polarity check of the same function;
    3. the same kind of leaf change with fewer of its properties kept;
    4. put first: a changed copy of another test's ``assert <pure call> == <expected>`` (same
       file first, then other preferred files, then any whose names this file has), else of a
       whole other test of the same file (one without fixtures).

    Only checks that surely run are changed (not after an early ``return``), and only graded
    tests without fixtures or decorators vouch for a call returning (:func:`build_pool`).
    """
    with ast_work():
        if pool is None:
            pool = build_pool({file or "<test>": module or ast.Module(body=[func], type_ignores=[])})
        mutator = _Mutator(func, module, pool, rng, file)
        done = mutator.run()
        if done and witnesses is not None:
            witnesses += dict.fromkeys(mutator.witnesses)
        return done
_EXC_SWAPS = ("ValueError", "TypeError", "KeyError", "IndexError", "RuntimeError",
              "AttributeError", "ZeroDivisionError", "OverflowError", "LookupError",
              "NotImplementedError", "OSError", "UnicodeError")


class _Mutator:
    """One test's mutation: finds its checks, inputs and expected values, then tries the
    mutations of :func:`mutate_test` in order."""

    def __init__(self, func: ast.FunctionDef | ast.AsyncFunctionDef, module: ast.Module | None,
                 pool: MutationPool, rng: random.Random, file: str | None) -> None:
        self.func, self.module, self.pool, self.rng, self.file = func, module, pool, rng, file
        #: other tests whose pass the mutant relies on (a mutant built from what another test
        #: shows holds only where that test passes too: wrong code may pass both otherwise)
        self.witnesses: list[str] = []
        self.imported = _imported(module) if module is not None else set()
        scope = module.body if module is not None else []
        # names of fixed values an expected side may hold: imported ones, module constants
        self.constants = self.imported | {t.id for n in scope if isinstance(n, ast.Assign)
                                          for t in n.targets if isinstance(t, ast.Name)}
        helpers = {n.name: n for n in scope if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                   and not n.name.startswith("test")}
        self.bodies: list[list[ast.stmt]] = [func.body]
        for stmt in func.body:  # a helper-style test: the checks live in a helper it calls
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and \
                    isinstance(stmt.value.func, ast.Name) and stmt.value.func.id in helpers:
                helper = helpers[stmt.value.func.id]
                if helper.body not in self.bodies:
                    self.bodies.append(helper.body)
        self.running = [(s, loops) for body in self.bodies for s, loops in _running(body, module)]
        self.asserts = [a for s, _ in self.running if (a := _as_assert(s)) is not None]
        self.env = _pure_env(func.body, self.imported)
        # expected sides: literal sides of == (and startswith prefixes), and literals assigned to
        # a name only such a comparison reads (one that is also an input would change both sides)
        self.expected: list[ast.expr] = []
        for a in self.asserts:
            self.expected += _eq_literals(a.test, self.constants)
            self.expected += _prefix_literals(a.test)
        self.expected += _case_expected(func, self.asserts)
        compared = {n.id for a in self.asserts for n in _eq_names(a.test)}
        loads = [n.id for n in ast.walk(module if module is not None else func)
                 if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]
        expected_only = {name for name in compared if loads.count(name) == 1}
        self.assigned = [s.value for body in [*self.bodies, scope] for s in body
                         if isinstance(s, ast.Assign) and len(s.targets) == 1
                         and isinstance(s.targets[0], ast.Name)
                         and s.targets[0].id in expected_only and _is_literal(s.value)]
        expected_ids = {id(n) for root in [*self.expected, *self.assigned] for n in ast.walk(root)}
        # inputs: every other literal of the test (and of the module constants it reads)
        read = {n.id for body in self.bodies for s in body for n in ast.walk(s)
                if isinstance(n, ast.Name)}
        far_roots: list[ast.AST] = [s for body in self.bodies for s in body]
        far_roots += [s.value for s in scope if isinstance(s, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id in read for t in s.targets)]
        self.far = _Inputs([n for root in far_roots for n in ast.walk(root)
                            if isinstance(n, ast.Constant) and id(n) not in expected_ids])
        self.near: dict[int, _Inputs] = {}
        for a in self.asserts:
            sides = _eq_sides(a.test)
            for side in [*_eq_literals(a.test, self.constants), *_prefix_literals(a.test)]:
                others = [s for s in (sides or [a.test]) if s is not side]
                names = {n.id for o in others for n in ast.walk(o) if isinstance(n, ast.Name)}
                roots: list[ast.AST] = [*others, *(s.value for body in self.bodies for s in body
                                                   if isinstance(s, ast.Assign) and any(
                                                       isinstance(t, ast.Name) and t.id in names
                                                       for t in s.targets))]
                self.near[id(side)] = _Inputs([n for r in roots for n in ast.walk(r)
                                               if isinstance(n, ast.Constant)
                                               and id(n) not in expected_ids])
        self.chars = "".join(n.value for s in far_roots for n in ast.walk(s)
                             if isinstance(n, ast.Constant) and isinstance(n.value, str))

    # ------------------------------------------------------------------ driver
    def run(self) -> bool:
        return self._expected_values(close=True) or self._other_checks() or \
            self._expected_values(close=False) or self._borrow()

    def _expected_values(self, close: bool) -> bool:
        """``close``: every property of the changed value kept (its relation to all the test's
        inputs, then to its own comparison's), or two items of an expected list swapped (the
        same values), then without the container's order and distinctness. Else: any swap, then
        a value of the same form only."""
        roots = [*self.expected, *self.assigned]
        if close:
            return self._mutate_values(roots, 2) or self._swap_items(roots) or \
                self._mutate_values(roots, 1) or self._mutate_values(roots, 2, keep_shape=False) or \
                self._mutate_values(roots, 1, keep_shape=False)
        return self._swap_items(roots, keep_shape=False) or self._mutate_values(roots, 0) or \
            self._mutate_values(roots, 0, keep_shape=False)

    def _other_checks(self) -> bool:
        # (swapping the operands of ``a < b`` is no mutant: a wrong ``__lt__`` passes both)
        other = self._raises() or self._checks()
        if other:
            self.rng.choice(other)()
        return bool(other)

    # ------------------------------------------------------------------ expected values
    def _mutate_values(self, roots: list[ast.expr], level: int, keep_shape: bool = True) -> bool:
        sites: list[tuple[int, ast.expr, ast.Constant, bool]] = []
        for root in roots:
            parents = {id(c): p for p in ast.walk(root) for c in ast.iter_child_nodes(p)}
            keys = {id(k) for n in ast.walk(root) if isinstance(n, ast.Dict) for k in n.keys if k}
            for leaf in ast.walk(root):
                if isinstance(leaf, ast.Constant) and isinstance(leaf.value, (bool, int, float, str, bytes)):
                    negative = isinstance(parents.get(id(leaf)), ast.UnaryOp) and \
                        isinstance(parents[id(leaf)].op, ast.USub)
                    rank = 2 if isinstance(leaf.value, bool) else 1 if id(leaf) in keys else 0
                    sites.append((rank, root, leaf, negative))
        self.rng.shuffle(sites)
        sites.sort(key=lambda s: s[0])  # values first, then dict keys, then booleans
        return any(self._mutate_leaf(root, leaf, negative, level, keep_shape)
                   for _, root, leaf, negative in sites)

    def _swap_items(self, roots: list[ast.expr], keep_shape: bool = True) -> bool:
        """Two different items of an expected list or tuple swapped: every value stays one the
        test had, and a sequence compares item by item, so the expected value changed."""
        options = []
        for root in roots:
            for node in ast.walk(root):
                if isinstance(node, (ast.List, ast.Tuple)):
                    dumps = [ast.dump(e) for e in node.elts]
                    kinds = [_skeleton(e) for e in node.elts]  # an int and a list never swap
                    options += [(root, node, i, j) for i in range(len(dumps))
                                for j in range(i + 1, len(dumps))
                                if dumps[i] != dumps[j] and kinds[i] == kinds[j]
                                and not (_key(node.elts[i]) is not _NO_KEY
                                         and _key(node.elts[i]) == _key(node.elts[j]))]
        self.rng.shuffle(options)
        for root, node, i, j in options:
            shape = _shape_signature(root)
            node.elts[i], node.elts[j] = node.elts[j], node.elts[i]
            if not keep_shape or _shape_signature(root) == shape:
                return True
            node.elts[i], node.elts[j] = node.elts[j], node.elts[i]
        return False

    def _mutate_leaf(self, root: ast.expr, leaf: ast.Constant, negative: bool, level: int,
                     keep_shape: bool = True) -> bool:
        old = leaf.value
        value = -old if negative and not isinstance(old, (str, bytes)) else old  # type: ignore[operator]
        near = self.near.get(id(root), self.far)
        literal = _is_literal(root)
        before = ast.literal_eval(ast.unparse(root)) if literal else None
        shape = _shape_signature(root)
        # the leaf alone, else with its twins (``["svc", "svc"]`` stays a pair of equal items)
        siblings = next((list(p.elts if isinstance(p, (ast.List, ast.Tuple, ast.Set)) else p.args)
                         for p in ast.walk(root) if isinstance(p, (ast.List, ast.Tuple, ast.Set, ast.Call))
                         and any(e is leaf for e in (p.elts if not isinstance(p, ast.Call) else p.args))),
                        [])
        twins = [e for e in siblings if e is not leaf and isinstance(e, ast.Constant)
                 and type(e.value) is type(old) and e.value == old and not negative]
        made = _stdlib_values(root, [leaf, *twins])  # Fraction(1, 2) == Fraction(2, 4)
        for group in ([leaf], [leaf, *twins]) if twins else ([leaf],):
            # a string a call turns into a value (``Decimal("0.16")``) changes in place only:
            # ``Decimal("00.16")`` would be the same value
            in_call = any(isinstance(n, ast.Call) and any(
                a is leaf for a in [*n.args, *(k.value for k in n.keywords)]) for n in ast.walk(root))
            for new in _candidates(value, near, self.far, self.pool, self.chars, self.rng, level,
                                   loose=not in_call):
                for n in group:
                    n.value = -new if negative and not isinstance(new, (str, bytes)) else new  # type: ignore[operator]
                try:
                    changed = not literal or ast.literal_eval(ast.unparse(root)) != before
                except ValueError:  # a negative value under a unary minus ("--2") is no literal
                    changed = False
                if changed and (not keep_shape or _shape_signature(root) == shape) and \
                        _constructible(root) and (not made or _stdlib_values(root, group) != made):
                    return True
                for n in group:
                    n.value = old
        return False

    # ------------------------------------------------------------------ raises tests
    def _raises(self) -> list[Callable[[], None]]:
        inputs: list[Callable[[], None]] = []
        patterns: list[Callable[[], None]] = []
        swaps: list[Callable[[], None]] = []
        for stmt, loops in self.running:
            if not isinstance(stmt, (ast.With, ast.AsyncWith)):
                continue
            for item in stmt.items:
                call = _raises_call(item)
                if call is None:
                    continue
                if len(stmt.body) == 1 and isinstance(stmt.body[0], (ast.Expr, ast.Assign)):
                    option = self._valid_input(stmt.body[0].value, loops)
                    if option is not None:
                        inputs.append(option)
                for kw in call.keywords:
                    if kw.arg == "match" and isinstance(kw.value, ast.Constant) and \
                            isinstance(kw.value.value, str):
                        new = _mutate_pattern(kw.value.value, self.chars, self.rng)
                        if new is not None:
                            patterns.append(functools.partial(setattr, kw.value, "value", new))
                swap = self._swap_exception(call)
                if swap is not None:
                    swaps.append(swap)
        return inputs + patterns or swaps

    def _valid_input(self, call: ast.expr, loops: tuple[tuple[str, ast.expr], ...]
                     ) -> Callable[[], None] | None:
        """The raising call's literals replaced by those of the same call where a test shows it
        returning: a pure call that returned there returns here, so ``pytest.raises`` fails."""
        env = dict(self.env)
        for name, source in loops:
            if isinstance(source, (ast.List, ast.Tuple)):
                env[name] = self.rng.choice(source.elts)
        view = _view(call, self.imported, env)
        if view is None:
            return None
        leaves = [n for n in ast.walk(view) if isinstance(n, ast.Constant)]
        skeleton = _skeleton(view)
        mine = [n.value for n in leaves]
        choices: list[tuple[int, list[object], ast.expr]] = []
        for i, (other_skeleton, other) in enumerate(self.pool.valid):
            if other_skeleton != skeleton:
                continue
            values = [n.value for n in _constants(other)]
            target: dict[int, object] = {}
            if values == mine or any(target.setdefault(id(leaf), v) != v
                                     for leaf, v in zip(leaves, values, strict=True)):
                continue  # the same call, or one leaf asked to take two values
            # rank: from a hidden file (unseen by the code under test), then shaped alike
            alike = all(_features(a, self.far, self.far, 0) == _features(b, self.far, self.far, 0)
                        for a, b in zip(mine, values, strict=True))
            choices.append(((i >= self.pool.preferred_valid) * 2 + (not alike), values, other))
        if not choices:
            return None
        best = min(rank for rank, _, _ in choices)
        values, other = self.rng.choice([(v, o) for rank, v, o in choices if rank == best])

        def apply() -> None:
            for leaf, v in zip(leaves, values, strict=True):
                leaf.value = v
            self.witnesses.append(self.pool.source[id(other)])
        return apply

    def _swap_exception(self, call: ast.Call) -> Callable[[], None] | None:
        """A builtin exception type swapped for an unrelated builtin one: what correct code
        raises (the type or a subclass) is then not what the mutant expects."""
        if not call.args or not isinstance(call.args[0], ast.Name):
            return None
        old = _builtin_exception(call.args[0].id)
        if old is None:
            return None
        # a type the task's tests expect elsewhere, when there is one: an unusual type says
        # "mutant" to code that knows the visible tests
        seen = [e for e in self.pool.exceptions if _unrelated(old, _builtin_exception(e))]
        options = seen or [e for e in _EXC_SWAPS if _unrelated(old, _builtin_exception(e))]
        if not options:
            return None
        new = self.rng.choice(options)
        return functools.partial(setattr, call.args[0], "id", new)

    # ------------------------------------------------------------------ checks and orderings
    def _checks(self) -> list[Callable[[], None]]:
        """``assert f(...)`` / ``assert not f(...)``: the arguments of a check of the same
        function with the opposite outcome (both lines exchanged when the test has both)."""
        mine = []
        for a in self.asserts:
            negated = isinstance(a.test, ast.UnaryOp) and isinstance(a.test.op, ast.Not)
            call = a.test.operand if negated else a.test
            if isinstance(call, ast.Call):
                view = _view(call, self.imported, self.env)
                if view is not None:
                    mine.append((_skeleton(view), view, not negated))
        options: list[Callable[[], None]] = []
        for skel, view, truthy in mine:
            partners = [v for s, v, t in mine if s == skel and t != truthy]
            if partners:
                options.append(functools.partial(_exchange, view, self.rng.choice(partners)))
                continue
            own = [n.value for n in _constants(view)]
            others = [v for s, v, t in self.pool.checks if s == skel and t != truthy
                      and [n.value for n in _constants(v)] != own]
            if others:
                options.append(functools.partial(self._copy_check, view, self.rng.choice(others)))
        return options

    def _copy_check(self, view: ast.expr, other: ast.expr) -> None:
        _copy_leaves(view, other)
        self.witnesses.append(self.pool.source[id(other)])

    # ------------------------------------------------------------------ last resort
    def _borrow(self) -> bool:
        """A changed copy of another test's ``assert <pure call> == <expected>`` put first in this
        test (correct code fails it before anything else runs): from the same file, else from
        another preferred (hidden) file, else any, as long as this file imports its names."""
        name = self.func.name
        scope = self.module.body if self.module is not None else []
        known = self.constants | {n.name for n in scope if isinstance(
            n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not n.name.startswith("test")}
        ranked: list[tuple[int, ast.Assert]] = []
        for path, found in self.pool.borrow.items():
            rank = 0 if path == self.file else 1 if path in self.pool.preferred else 2
            for test, stmt in found:
                if path == self.file and test.rsplit("::", 1)[-1] == name:
                    continue
                names = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)}
                if names <= known:
                    ranked.append((rank, stmt))
        self.rng.shuffle(ranked)
        ranked.sort(key=lambda r: r[0])
        for _, original in ranked:
            stmt = _clone(original)
            holder = ast.parse("def _():\n    pass\n").body[0]
            assert isinstance(holder, ast.FunctionDef)
            holder.body = [stmt]
            helper = _Mutator(holder, self.module, self.pool, self.rng, None)
            if helper._expected_values(close=True) or helper._expected_values(close=False):
                at = 1 if self.func.body and _is_docstring(self.func.body[0]) else 0
                self.func.body.insert(at, stmt)
                self.witnesses += [self.pool.source[id(original)], *helper.witnesses]
                return True
        return self._borrow_body()

    def _borrow_body(self) -> bool:
        """A changed copy of a whole other test of the same file (one without fixtures), put
        first: the tests of a grading run alone in any order, so that body fails here as its
        changed copy fails on its own."""
        found = [f for test, f in self.pool.bodies.get(self.file or "", []) if test != self.func.name]
        self.rng.shuffle(found)
        for original in found:
            other = _clone(original)
            helper = _Mutator(other, self.module, self.pool, self.rng, None)
            if helper._expected_values(close=True) or helper._other_checks() or \
                    helper._expected_values(close=False):
                at = 1 if self.func.body and _is_docstring(self.func.body[0]) else 0
                body = other.body[1:] if other.body and _is_docstring(other.body[0]) else other.body
                self.func.body[at:at] = body
                self.witnesses += [self.pool.source[id(original)], *helper.witnesses]
                return True
        return False


def _builtin_exception(name: str) -> type[BaseException] | None:
    obj = getattr(builtins, name, None)
    return obj if isinstance(obj, type) and issubclass(obj, Exception) and obj is not Exception else None


def _unrelated(a: type[BaseException], b: type[BaseException] | None) -> bool:
    return b is not None and not issubclass(a, b) and not issubclass(b, a)


def _exchange(a: ast.expr, b: ast.expr) -> None:
    la = [n for n in ast.walk(a) if isinstance(n, ast.Constant)]
    lb = [n for n in ast.walk(b) if isinstance(n, ast.Constant)]
    values_a, values_b = [n.value for n in la], [n.value for n in lb]
    for leaf, v in zip(la, values_b, strict=True):
        leaf.value = v
    for leaf, v in zip(lb, values_a, strict=True):
        leaf.value = v


def _copy_leaves(target: ast.expr, source: ast.expr) -> None:
    for leaf, other in zip([n for n in ast.walk(target) if isinstance(n, ast.Constant)],
                           [n for n in ast.walk(source) if isinstance(n, ast.Constant)], strict=True):
        leaf.value = other.value
