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
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from proofgym.verify.sandboxed.withheld import Expectation

__all__ = ["decode", "encode", "judge", "verdicts"]


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
        raise ValueError("not an encoded value")
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
        raise ValueError(f"not an encoded value: {exc}") from None
    raise ValueError(f"not an encoded value: tag {tag!r}")


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
        return False  # the computed value was no plain data: it cannot be compared here
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


def verdicts(withheld: Mapping[str, list[Expectation]], observed: Mapping[str, str]
             ) -> dict[str, tuple[str, str] | None]:
    """Generated test id (of a test whose process passed) -> ``None`` where every check was
    observed as its code runs them and holds; else ``(kind, why)``: ``"wrong"`` (a value that
    does not hold: wrong code) or ``"unobserved"`` (checks missing, extra or out of order: a
    test that passed without running its own statements, which only tampering does); ``why``
    names the check, never its expected value."""
    return {gen: _verdict(expectations, observed.get(gen)) for gen, expectations in withheld.items()}


def _verdict(expectations: list[Expectation], payload: str | None) -> tuple[str, str] | None:
    if payload is None:
        return "unobserved", "the test passed without sending what its withheld checks computed"
    try:
        records = json.loads(payload)
    except (ValueError, RecursionError):
        return "unobserved", "the test's observations are not valid"
    if not isinstance(records, list) or len(records) != len(expectations) or not all(
            isinstance(r, list) and len(r) == 2 and r[0] == e.site
            for e, r in zip(expectations, records, strict=False)):
        return "unobserved", (f"the test passed without observing its withheld checks as its "
                              f"code runs them ({len(expectations)} observations, in order)")
    for exp, (_, observed) in zip(expectations, records, strict=True):
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
