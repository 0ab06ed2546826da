"""What a test process observed for its withheld checks, and the host's judgement of it.

The wire format of an observed value (:func:`encode`, :func:`decode`: plain JSON-able data, the
test process's encoder is ``runner._plain``), Python's comparison semantics for one withheld
check (:func:`judge`, including ``pytest.approx`` and unittest's ``assertAlmostEqual``) and the
verdict on a test's whole observation sequence (:func:`verdicts`). The checks themselves are
rewritten by :mod:`proofgym.verify.sandboxed.withheld`.
"""

from __future__ import annotations

import json
import math
import operator
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Union

from proofgym.core.errors import EncodedValueError

if TYPE_CHECKING:
    from proofgym.verify.sandboxed.withheld import Expectation

__all__ = ["Choice", "Repeat", "checks_of", "decode", "encode", "judge", "unplain", "verdicts"]


@dataclass(frozen=True)
class Choice:
    """An ``if``/``else`` of a test: the checks of exactly one of ``alternatives`` are observed
    (each alternative a pattern that observes at least one check)."""

    alternatives: tuple[tuple[Item, ...], ...]


@dataclass(frozen=True)
class Repeat:
    """A ``for`` loop over an iterable the host cannot count: ``body`` is observed once per
    iteration, and at least once (a loop that ran no iteration checked nothing: the test
    fails)."""

    body: tuple[Item, ...]


#: What a test observes, in order: a check, a choice of branches, a repeated loop body.
Item = Union["Expectation", Choice, Repeat]


def checks_of(pattern: Sequence[Item]) -> Iterator[Expectation]:
    """Every check a pattern names (each once per place it holds it)."""
    for item in pattern:
        if isinstance(item, Choice):
            for alternative in item.alternatives:
                yield from checks_of(alternative)
        elif isinstance(item, Repeat):
            yield from checks_of(item.body)
        else:
            yield item


def encode(value: object) -> object:
    """A plain value as JSON-able data: what the test process sends (the runner has its own
    copy of this) and what a literal is measured by. ``TypeError`` for anything else."""
    if value is None or type(value) in (bool, int, float, str):
        return value
    if type(value) is list:
        return [encode(v) for v in value]
    if type(value) is tuple:
        return {"t": [encode(v) for v in value]}
    if type(value) is dict:
        return {"d": [[encode(k), encode(v)] for k, v in value.items()]}
    if type(value) in (set, frozenset):
        return {"s" if type(value) is set else "z": [encode(v) for v in value]}
    if type(value) in (bytes, bytearray):
        return {"b" if type(value) is bytes else "y": bytes(value).hex()}
    if type(value) is complex:
        return {"c": [value.real, value.imag]}
    raise TypeError(f"not a plain value: {type(value).__name__}")


def decode(data: object) -> object:
    """The value :func:`encode` (or the test process) sent; ``ValueError`` if it is no such."""
    if data is None or type(data) in (bool, int, float, str):
        return data
    if type(data) is list:
        return [decode(v) for v in data]
    if type(data) is not dict or len(data) != 1:
        raise EncodedValueError("not an encoded value")
    (tag, inner), = data.items()
    try:
        if tag == "t":
            return tuple(decode(v) for v in inner)
        if tag == "d":
            return {decode(k): decode(v) for k, v in inner}
        if tag in ("s", "z"):
            return (set if tag == "s" else frozenset)(decode(v) for v in inner)
        if tag in ("b", "y"):
            return (bytes if tag == "b" else bytearray)(bytes.fromhex(inner))
        if tag == "c":
            return complex(float(inner[0]), float(inner[1]))
    except (TypeError, ValueError) as exc:  # an unhashable key, a malformed entry
        raise EncodedValueError(f"not an encoded value: {exc}") from None
    raise EncodedValueError(f"not an encoded value: tag {tag!r}")


_COMPARE = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
            ">": operator.gt, ">=": operator.ge, "in": lambda a, b: a in b,
            "not in": lambda a, b: a not in b, "is": operator.is_, "is not": operator.is_not}


def _close(actual: object, expected: object, rel: float | None, tol: float | None) -> bool:
    """``actual == pytest.approx(expected, rel=rel, abs=tol)`` for numbers and (nested) lists,
    tuples and dicts of numbers, as pytest defines it."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and actual.keys() == expected.keys() and \
            all(_close(actual[k], v, rel, tol) for k, v in expected.items())
    if isinstance(expected, (list, tuple)):
        return isinstance(actual, (list, tuple)) and len(actual) == len(expected) and \
            all(_close(a, e, rel, tol) for a, e in zip(actual, expected, strict=True))
    if not isinstance(expected, (int, float, complex)) or isinstance(expected, bool) or \
            not isinstance(actual, (int, float, complex)):
        return actual == expected
    if actual == expected:
        return True
    if isinstance(expected, float) and (math.isinf(expected) or math.isnan(expected)):
        return False
    absolute = tol if tol is not None else 1e-12
    if rel is None and tol is not None:
        tolerance = absolute
    else:
        tolerance = max((rel if rel is not None else 1e-6) * abs(expected), absolute)
    return abs(actual - expected) <= tolerance


def judge(expectation: Expectation, observed: object) -> bool:
    """Whether one observation (as sent: encoded) holds against its withheld literal."""
    if isinstance(observed, dict) and set(observed) == {"unplain"}:
        # the computed value was no plain data: it cannot be compared here, but it is an object
        # that none of the plain singletons is, whatever its methods (``r is not None``)
        singleton = any(expectation.expected is s for s in (None, True, False))
        return singleton and expectation.op == "is not"
    try:
        value = decode(observed)
        exp = expectation
        if exp.op in ("approx", "not approx"):
            return _close(value, exp.expected, exp.rel, exp.abs) == (exp.op == "approx")
        if exp.op == "almost":
            if value == exp.expected:
                return True
            diff = abs(value - exp.expected)  # type: ignore[operator]
            return diff <= exp.delta if exp.delta is not None else round(diff, exp.places) == 0
        if exp.literal_left:
            return bool(_COMPARE[exp.op](exp.expected, value))
        return bool(_COMPARE[exp.op](value, exp.expected))
    except (ValueError, TypeError, ArithmeticError, RecursionError):
        return False  # values a test could not have compared either: the check fails


def verdicts(withheld: Mapping[str, Sequence[Item]], observed: Mapping[str, str]
             ) -> dict[str, tuple[str, str] | None]:
    """Generated test id (of a test whose process passed) -> ``None`` where every check was
    observed as its code runs them and holds; else ``(kind, why)``: ``"wrong"`` (a value that
    does not hold, or a :class:`Repeat` that ran no iteration: wrong code may return an
    empty iterable) or ``"unobserved"`` (checks missing, extra or out of order, or a sequence no
    run of the test's statements makes: no branch or two branches of a :class:`Choice`, an
    iteration cut short; a test that passed without running its own statements, which only
    tampering does); ``why`` names the check, never its expected value. A site names one check
    wherever it is observed, so each value is judged against the literal of its site."""
    return {gen: _verdict(expectations, observed.get(gen)) for gen, expectations in withheld.items()}


def _matches(pattern: tuple[Item, ...], sites: list[object], idle_loops: bool = False) -> bool:
    """Whether the observed ``sites`` are a sequence of the pattern's (a regular language:
    the sets of end positions, memoised by sub-pattern and start); with ``idle_loops``, a
    :class:`Repeat` may also run no iteration."""
    memo: dict[tuple[int, int], frozenset[int]] = {}
    keep: list[object] = []  # the sub-patterns memoised by id stay alive while matching

    def ends(seq: tuple[Item, ...], start: int) -> frozenset[int]:
        key = (id(seq), start)
        if key in memo:
            return memo[key]
        keep.append(seq)
        at = frozenset([start])
        for item in seq:
            nxt: set[int] = set()
            for i in at:
                if isinstance(item, Choice):
                    for alternative in item.alternatives:
                        nxt |= ends(alternative, i)
                elif isinstance(item, Repeat):
                    frontier, seen = set(ends(item.body, i)) | ({i} if idle_loops else set()), set()
                    while frontier:
                        j = frontier.pop()
                        if j not in seen:
                            seen.add(j)
                            frontier |= ends(item.body, j) - seen
                    nxt |= seen
                elif i < len(sites) and sites[i] == item.site:
                    nxt.add(i + 1)
            at = frozenset(nxt)
            if not at:
                break
        memo[key] = at
        return at

    return len(sites) in ends(tuple(pattern), 0)


def _verdict(pattern: Sequence[Item], payload: str | None) -> tuple[str, str] | None:
    if payload is None:
        return "unobserved", "the test passed without sending what its withheld checks computed"
    try:
        records = json.loads(payload)
    except (ValueError, RecursionError):
        return "unobserved", "the test's observations are not valid"
    by_site = {e.site: e for e in checks_of(pattern)}
    if not isinstance(records, list) or not all(
            isinstance(r, list) and len(r) == 2 and type(r[0]) is int and r[0] in by_site
            for r in records) or not _matches(tuple(pattern), [r[0] for r in records], True):
        return "unobserved", ("the test passed without observing its withheld checks as its "
                              "code runs them (in order, each branch and loop as written)")
    if not _matches(tuple(pattern), [r[0] for r in records]):  # wrong code may return nothing
        return "wrong", ("a loop of the test over a computed iterable ran no iteration: its "
                         "withheld checks checked nothing")
    for site, observed in records:
        exp = by_site[site]
        if isinstance(observed, dict) and set(observed) == {"big"}:
            observed_ok = exp.op in ("!=", "not in", "not approx", "is not")
        else:
            observed_ok = judge(exp, observed)
        if not observed_ok:
            shown = json.dumps(observed)
            shown = shown if len(shown) <= 200 else shown[:200] + "..."
            return "wrong", (f"withheld check {exp.site + 1} ({exp.op}, line {exp.line}) does "
                             f"not hold: the computed value was {shown}")
    return None


def unplain(withheld: Mapping[str, Sequence[Item]], observed: Mapping[str, str]
            ) -> dict[str, tuple[str, ...]]:
    """Generated test id -> the checks (``Expectation.computed``) whose value its process sent
    as no plain data (``{"unplain": ...}``): checks the host cannot compare, which a task's
    reference run lists so that they stay asserts (``withheld.withhold_source``'s ``keep``).
    Read from what the process sent: informative of the code that ran, trusted only where that
    code is the task's own reference."""
    out: dict[str, tuple[str, ...]] = {}
    for gen, pattern in withheld.items():
        try:
            records = json.loads(observed.get(gen) or "[]")
        except (ValueError, RecursionError):
            continue
        by_site = {e.site: e for e in checks_of(pattern)}
        found = {by_site[r[0]].computed for r in records if isinstance(r, list) and len(r) == 2
                 and type(r[0]) is int and r[0] in by_site and isinstance(r[1], dict)
                 and set(r[1]) == {"unplain"}} if isinstance(records, list) else set()
        if found:
            out[gen] = tuple(sorted(found))
    return out
