"""The value model: what a task's tests look like (:class:`MutationPool`, built by :func:`build_pool`
from every test file, hidden ones first), and the replacement values drawn from it, each
keeping the features of the real value that a reader could check (sign, digit count, float repr
length, string length and character classes, whether it occurs among the test's inputs).
"""

from __future__ import annotations

import ast
import datetime
import decimal
import fractions
import functools
import itertools
import random
import re
import string
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from proofgym.verify.sandboxed.mutants.checks import (
    _as_assert,
    _constants,
    _eq_literals,
    _eq_sides,
    _imported,
    _is_literal,
    _leaf_values,
    _plain,
    _pure_env,
    _raises_type,
    _running,
    _skeleton,
    _view,
)
from proofgym.verify.sandboxed.mutants.listing import _clone, _parse, _test_functions, ast_work


@dataclass
class MutationPool:
    """What a task's tests look like, for drawing mutants that look like them.

    ``expected``: every leaf value of an expected side (the distribution replacement values are
    drawn from); ``valid``: pure calls (imported functions of literals) that some test runs
    outside ``pytest.raises``, so they return; ``checks``: ``(call, truthy)`` of
    ``assert f(...)`` / ``assert not f(...)``; ``borrow``: per file, ``assert f(<literals>) ==
    <literal>`` statements with their test's name; ``exceptions``: exception names the tests
    expect. Entries from the preferred (hidden) files come first.
    """

    expected: list[object] = field(default_factory=list)
    valid: list[tuple[str, ast.expr]] = field(default_factory=list)
    preferred_valid: int = 0  # how many of ``valid`` come from preferred files
    #: id of an entry of ``valid``, ``checks``, ``borrow`` or ``bodies`` -> the test it is from
    source: dict[int, str] = field(default_factory=dict)
    checks: list[tuple[str, ast.expr, bool]] = field(default_factory=list)
    borrow: dict[str, list[tuple[str, ast.Assert]]] = field(default_factory=dict)
    exceptions: list[str] = field(default_factory=list)
    preferred: set[str] = field(default_factory=set)
    #: per file, its module-level tests that take no fixtures and have no decorators
    bodies: dict[str, list[tuple[str, ast.FunctionDef]]] = field(default_factory=dict)


def build_pool(trees: Mapping[str, ast.Module | bytes | str],
               preferred: Iterable[str] = (), passing: Iterable[str] | None = None) -> MutationPool:
    """The :class:`MutationPool` of a task's test files (path -> AST or source); ``preferred``
    files' calls are tried first (the hidden ones: the code under test has not seen them).

    What a mutant may take as known to return or hold (``valid``, ``checks``, ``borrow``,
    ``bodies``) comes only from tests in ``passing`` (node ids; by default every test), and of
    those only from ones without fixtures or decorators (a skipped test or a monkeypatched one
    shows nothing): correct code passes the tests it is graded on."""
    with ast_work():
        preferred = set(preferred)
        passing = None if passing is None else set(passing)
        pool = MutationPool(preferred=preferred)
        order = sorted(trees, key=lambda p: p not in preferred)
        late: list[tuple[str, ast.expr]] = []
        late_checks: list[tuple[str, ast.expr, bool]] = []
        for path in order:
            tree = trees[path]
            if not isinstance(tree, ast.Module):
                tree = _parse(path, tree)
            imported = _imported(tree)
            helpers = [("", n) for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                       and not n.name.startswith("test")]
            for name, func in [*_test_functions(tree), *helpers]:
                trusted = bool(name) and _plain(func) and (passing is None or f"{path}::{name}" in passing)
                # only a trusted test's statements are read through it (_collect)
                env = _pure_env(func.body, imported) if trusted else {}
                for stmt, _ in _running(func.body, tree):
                    _collect(stmt, imported, env, pool, path, name,
                             pool.valid if path in preferred else late,
                             pool.checks if path in preferred else late_checks, trusted)
            pool.bodies[path] = [(n.name, _clone(n)) for n in tree.body
                                 if isinstance(n, ast.FunctionDef) and n.name.startswith("test")
                                 and _plain(n) and (passing is None or f"{path}::{n.name}" in passing)]
            pool.source.update({id(f): f"{path}::{name}" for name, f in pool.bodies[path]})
            for node in ast.walk(tree):
                exc = _raises_type(node)
                if exc is not None:
                    pool.exceptions.append(exc)
        pool.preferred_valid = len(pool.valid)
        pool.valid += late
        pool.checks += late_checks
        return pool


def _collect(stmt: ast.stmt, imported: set[str], env: dict[str, ast.expr], pool: MutationPool,
             path: str, name: str, valid: list, checks: list, trusted: bool = True) -> None:
    """Record one running statement of a test: its expected values, and (``trusted``: a test
    that passes with correct code) the pure calls it surely evaluates (so they returned), its
    truth checks and borrowable asserts."""
    stmt = _as_assert(stmt) or stmt  # ``self.assertEqual(a, b)`` checks as ``assert a == b``
    if not trusted:
        if isinstance(stmt, ast.Assert):
            for side in _eq_literals(stmt.test):
                pool.expected += [v for v, _ in _leaf_values(side)]
        return
    evaluated: list[ast.expr] = []
    if isinstance(stmt, (ast.Assign, ast.Expr)):
        evaluated.append(stmt.value)
    elif isinstance(stmt, ast.Assert):
        test = stmt.test
        if isinstance(test, ast.Compare) and len(test.ops) == 1:  # a chain may stop early
            evaluated += [test.left, *test.comparators]
        negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
        call = test.operand if negated else test
        if isinstance(call, ast.Call):
            evaluated.append(call)
            view = _view(call, imported, env)
            if view is not None and _constants(view):
                checks.append((_skeleton(view), _clone(view), not negated))
                pool.source[id(checks[-1][1])] = f"{path}::{name}"
        for side in _eq_literals(test):
            pool.expected += [v for v, _ in _leaf_values(side)]
        sides = _eq_sides(test)
        left = _view(sides[0], imported, env) if len(sides) == 2 else None
        if left is not None and _eq_literals(test) == [sides[1]] and \
                isinstance(left, (ast.Call, ast.Attribute, ast.Subscript)):
            check = ast.Assert(test=ast.Compare(left=_clone(left), ops=[ast.Eq()],
                                                comparators=[_clone(sides[1])]), msg=None)
            pool.borrow.setdefault(path, []).append((name, check))
            pool.source[id(check)] = f"{path}::{name}"
    for expr in evaluated:
        view = _view(expr, imported, env)
        if view is None:
            continue
        for sub in ast.walk(view):  # a pure call's arguments are evaluated before it
            if isinstance(sub, ast.Call) and _constants(sub):
                valid.append((_skeleton(sub), _clone(sub)))
                pool.source[id(valid[-1][1])] = f"{path}::{name}"


_Feature = tuple[object, ...]


class _Inputs:
    """The literal inputs of a test (or of one comparison): values, strings, and their forms."""

    def __init__(self, leaves: list[ast.Constant]) -> None:
        values = [n.value for n in leaves]
        self.strings = [v for v in values if isinstance(v, str)] + \
            [v.decode("latin-1") for v in values if isinstance(v, bytes)]
        self.norm = [_normal(s) for s in self.strings]
        self.ints = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
        self.ints += [int(d) for s in self.strings for d in _DIGITS.findall(s)]
        self.floats = [v for v in values if isinstance(v, float)]
        self.words = {w for s in self.norm for w in _WORD.findall(s)}
        self._int_set, self._float_set = set(self.ints), set(self.floats)
        self._joined = " ".join(self.strings)
        #: what the answers below depend on (equal inputs answer alike: see :func:`_verdicts`)
        self.key = (tuple(self.strings), tuple(self.ints), tuple(map(repr, self.floats)))
        # answers by text: a test's candidate replacements ask about the same texts again and
        # again (each leaf's draws, each layout), and the inputs never change
        self._texts: dict[str, tuple[bool, bool, bool]] = {}

    def has_int(self, v: int) -> bool:
        return v in self._int_set

    def has_float(self, v: float) -> bool:
        return v in self._float_set or repr(v) in self._joined

    def has_text(self, s: str) -> tuple[bool, bool, bool]:
        found = self._texts.get(s)
        if found is None:
            norm = _normal(s)
            found = self._texts[s] = (any(s in t for t in self.strings),
                                      any(norm in t for t in self.norm),
                                      all(w in self.words for w in _WORD.findall(norm)))
        return found


_DIGITS = re.compile(r"\d+")
_WORD = re.compile(r"\w+")


def _normal(text: str) -> str:
    """Case-folded, compatibility-decomposed, marks dropped: how an expected string relates to
    an input one ("Ångström" -> "angstrom")."""
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c)).casefold()


def _features(value: object, near: _Inputs, far: _Inputs, level: int, loose: bool = False) -> _Feature:
    """What a replacement must share with ``value``: its kind and form always; with level 1 its
    relation to the comparison's own inputs; with level 2 to all of the test's inputs too.
    ``loose``: a string's form is its runs of character classes (``"ok"`` and ``"pipe"`` alike),
    for replacements that are themselves whole inputs or words of them."""
    if isinstance(value, bool):
        return (bool,)
    if isinstance(value, int):
        form: _Feature = (int, value < 0, len(str(abs(value))))
        rel: list[Callable[[], _Feature]] = [lambda: (near.has_int(value),),
                                             lambda: (far.has_int(value),)]
    elif isinstance(value, float):
        text = repr(abs(value))
        shape = ("e", len(text)) if "e" in text or "n" in text else \
            (len(text.split(".")[0]), len(text.split(".")[1]))
        form = (float, value < 0, shape)
        rel = [lambda: (near.has_float(value),), lambda: (far.has_float(value),)]
    elif isinstance(value, (str, bytes)):
        text = value.decode("latin-1") if isinstance(value, bytes) else value
        form = _text_form(type(value), text, loose)
        rel = [lambda: near.has_text(text), lambda: far.has_text(text)]
    else:
        return (type(value), value)
    return form + tuple(x for r in rel[:level] for x in r())  # the costly part only when asked


@functools.lru_cache(maxsize=65536)
def _text_form(kind: type, text: str, loose: bool) -> _Feature:
    """A string's (or bytes') form for :func:`_features` (the same text is asked about many
    times: once per candidate it is drawn as, per leaf and per layout)."""
    classes = tuple(_char_class(c) for c in text)
    if loose:
        return (kind, tuple(c for i, c in enumerate(classes) if i == 0 or classes[i - 1] != c))
    return (kind, len(text), classes)


@functools.lru_cache(maxsize=4096)
def _char_class(c: str) -> str:
    if c.isascii():
        if c.islower():
            return "a"
        if c.isupper():
            return "A"
        if c.isdigit():
            return "0"
        return c  # punctuation and spaces stay what they are
    if c.isalpha() or c.isdigit():
        name = unicodedata.name(c, "")
        return f"{name.split(' ')[0]}:{'l' if c.islower() else 'u' if c.isupper() else 'x'}"
    return c


def _candidates(value: object, near: _Inputs, far: _Inputs, pool: MutationPool, chars: str,
                rng: random.Random, level: int, loose: bool = True) -> Iterator[object]:
    """Replacement values for ``value`` in the order to try them: drawn from the values of the
    same kind in the test's inputs and the task's expected values (by their frequency there)
    when there are enough of those, else also from small changes of ``value``; every one has
    ``value``'s :func:`_features` at ``level``."""
    want = _features(value, near, far, level)
    drawn: list[object]
    made: list[object]
    if isinstance(value, bool):
        yield not value
        return
    if isinstance(value, int):
        drawn = [*near.ints, *far.ints, *(v for v in pool.expected if type(v) is int)]
        made = [value + s * d for s in (1, -1) for d in (*range(1, 10), *range(10, 100, 10),
                                                          *range(100, 1000, 100))]
        digits = len(str(abs(value)))
        low = 0 if digits == 1 else 10 ** (digits - 1)
        made += [(-1 if value < 0 else 1) * rng.randrange(low, 10 ** digits) for _ in range(8)]
    elif isinstance(value, float):
        drawn = [*near.floats, *far.floats, *(v for v in pool.expected if type(v) is float)]
        text = repr(abs(value))
        places = len(text.split(".")[1]) if "." in text and "e" not in text else 0
        made = [round(value + s * d * 10 ** -places, places) for s in (1, -1) for d in range(1, 10)]
        made += [round(value + s * d * 10 ** (1 - places), places) for s in (1, -1) for d in range(1, 10)]
    elif isinstance(value, (str, bytes)):
        text = value.decode("latin-1") if isinstance(value, bytes) else value
        if isinstance(value, str) and level and loose:
            # a whole input, or words of the inputs, in place of the same: every token of the
            # expected value still occurs among the inputs when it did before
            loose_want = _features(value, near, far, level, loose=True)
            tokens = [*near.strings, *far.strings]
            words = [w for s in tokens for w in _WORD.findall(s)]
            tokens += [text[:m.start()] + w + text[m.end():] for m in _WORD.finditer(text)
                       for w in words if w != m.group()]
            alike = _verdicts(value, level, near, far, "loose")
            loose = []
            for v in tokens:
                if v not in alike:
                    alike[v] = v != value and _features(v, near, far, level, loose=True) == loose_want
                if alike[v]:
                    loose.append(v)
            rng.shuffle(loose)
            yield from dict.fromkeys(loose)
        strings = [*near.strings, *near.norm, *far.strings, *far.norm,
                   *(v for v in pool.expected if isinstance(v, str))]
        drawn = [s[i:i + len(text)] for s in strings for i in range(len(s) - len(text) + 1)] \
            if text else []
        made = _text_changes(text, chars, strings, rng)
        if isinstance(value, bytes):
            drawn = [_latin1(s) for s in drawn]
            made = [_latin1(s) for s in made]
            drawn, made = [d for d in drawn if d is not None], [m for m in made if m is not None]
    else:
        return
    form = _features(value, near, far, 0)  # the cheap part first: most draws differ in form
    verdicts = _verdicts(value, level, near, far, "fits")

    def fits(v: object) -> bool:
        if v not in verdicts:
            verdicts[v] = v != value and type(v) is type(value) and \
                _features(v, near, far, 0) == form and _features(v, near, far, level) == want
        return verdicts[v]
    ok = [v for v in drawn if fits(v)]
    rng.shuffle(ok)  # by frequency: a value seen often is tried early often
    if len(set(ok)) < 3:
        extra = [v for v in made if fits(v)]
        rng.shuffle(extra)
        ok += extra
        rng.shuffle(ok)
    yield from dict.fromkeys(ok)


#: Which candidates fit a value, by the value, the level and the inputs: a test's leaves are
#: mutated again in every layout (each grading's, the bench's), over equal inputs, and asked
#: about the same candidates (every window of every input string, for a string).
_VERDICTS: dict[tuple[object, ...], dict[object, bool]] = {}
_VERDICTS_KEPT = 256


def _verdicts(value: object, level: int, near: _Inputs, far: _Inputs, which: str) -> dict[object, bool]:
    key = (type(value), repr(value), level, near.key, far.key, which)
    found = _VERDICTS.get(key)
    if found is None:
        if len(_VERDICTS) >= _VERDICTS_KEPT:
            _VERDICTS.clear()  # (a plain dict: graded on threads, a lost entry is only recomputed)
        found = _VERDICTS[key] = {}
    return found


_STDLIB_VALUES = {"date": datetime.date, "datetime": datetime.datetime, "time": datetime.time,
                  "timedelta": datetime.timedelta, "Decimal": decimal.Decimal,
                  "Fraction": fractions.Fraction}


def _constructible(root: ast.expr) -> bool:
    """Whether the standard-library values in ``root`` (``date(2024, 2, 31)`` is none) can be
    made: one that cannot says "mutant" to any code that tries."""
    for node in ast.walk(root):
        if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)):
            name = node.func.id if isinstance(node.func, ast.Name) else node.func.attr
            make = _STDLIB_VALUES.get(name)
            if make is None or not all(_is_literal(a) for a in node.args) or \
                    not all(_is_literal(k.value) for k in node.keywords):
                continue
            try:
                make(*(ast.literal_eval(a) for a in node.args),
                     **{k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg})
            except (ValueError, TypeError, ArithmeticError, decimal.InvalidOperation):
                return False
    return True


def _stdlib_values(root: ast.expr, leaves: list[ast.Constant]) -> list[object]:
    """The standard-library values in ``root`` that hold one of ``leaves``, made (a changed
    argument must change the value they make)."""
    ids = {id(n) for n in leaves}
    out: list[object] = []
    for node in ast.walk(root):
        if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)) and \
                any(id(n) in ids for n in ast.walk(node)):
            make = _STDLIB_VALUES.get(node.func.id if isinstance(node.func, ast.Name) else node.func.attr)
            if make is None:
                continue
            try:
                out.append(make(*(ast.literal_eval(a) for a in node.args),
                                **{k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg}))
            except (ValueError, TypeError, ArithmeticError, decimal.InvalidOperation, SyntaxError):
                out.append(None)
    return out


def _latin1(text: str) -> bytes | None:
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        return None


def _text_changes(text: str, chars: str, strings: list[str], rng: random.Random) -> list[str]:
    """``text`` with one word replaced by a same-length word of the inputs, or one letter or
    digit by another of the same class (from the test's own characters first)."""
    changes = []
    # in order of first appearance (a set's order would follow the process's string hashing)
    words = list(dict.fromkeys(w for s in strings for w in _WORD.findall(s)))
    for m in _WORD.finditer(text):
        changes += [text[:m.start()] + w + text[m.end():] for w in words
                    if len(w) == len(m.group()) and w != m.group()]
    for i, ch in enumerate(text):
        cls = _char_class(ch)
        if len(cls) == 1 and not cls.isalnum():  # punctuation and spaces keep their place
            continue
        same = [c for c in dict.fromkeys(chars) if c != ch and _char_class(c) == cls]
        alphabet = {"a": string.ascii_lowercase, "A": string.ascii_uppercase, "0": string.digits}
        same += [c for c in alphabet.get(cls, "") if c != ch]
        changes += [text[:i] + c + text[i + 1:] for c in same]
    return changes


def _shape_signature(root: ast.expr) -> list[object]:
    """For every sequence in ``root`` whose items compare: sorted up or down (strictly or not),
    and whether the items are distinct; a mutant keeps these (an out-of-order item says which
    one of a pair was changed)."""
    sig: list[object] = []
    for node in ast.walk(root):
        elts = node.elts if isinstance(node, (ast.List, ast.Tuple, ast.Set)) else \
            node.args if isinstance(node, ast.Call) else None
        if not elts or len(elts) < 2:
            continue
        keys = [_key(e) for e in elts]
        if any(k is _NO_KEY for k in keys):
            continue
        try:
            pairs = list(itertools.pairwise(keys))
            sig.append((all(a <= b for a, b in pairs), all(a < b for a, b in pairs),
                        all(a >= b for a, b in pairs), all(a > b for a, b in pairs),
                        len(set(map(repr, keys))) == len(keys)))
        except TypeError:
            sig.append(len(set(map(repr, keys))) == len(keys))
    return sig


_NO_KEY = object()


def _key(node: ast.expr) -> object:
    if _is_literal(node):
        try:
            return ast.literal_eval(node)
        except ValueError:
            return _NO_KEY
    if isinstance(node, ast.Call) and node.args and not node.keywords:
        keys = tuple(_key(a) for a in node.args)
        return _NO_KEY if any(k is _NO_KEY for k in keys) else keys
    return _NO_KEY


def _mutate_pattern(pattern: str, chars: str, rng: random.Random) -> str | None:
    """A ``match=`` pattern with one letter or digit changed in every alternative (a message
    that matched one alternative must not match its changed twin); plain patterns only."""
    if any(c in pattern for c in "\\()[]{}.^$*+?"):
        return None
    parts = pattern.split("|")
    out = []
    for part in parts:
        spots = [i for i, c in enumerate(part) if c.isalnum()]
        if not spots:
            return None
        i = rng.choice(spots)
        cls = _char_class(part[i])
        same = [c for c in dict.fromkeys(chars + string.ascii_lowercase)
                if c != part[i] and _char_class(c) == cls]
        if not same:
            return None
        out.append(part[:i] + rng.choice(same) + part[i + 1:])
    return "|".join(out)
