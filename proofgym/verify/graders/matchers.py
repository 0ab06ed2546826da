"""Built-in answer graders: exact, normalised, regex, numeric and symbolic-math match.

Each grader checks the answer a trajectory commits to (``extract_final_answer`` of its final
message: the ``\\boxed{}`` content, an ``Answer:`` line, or a short message) against a reference.
A grader is a rubric component (``grader(trace, runtime) -> float``) with a ``name`` and a
``version``, and can check a bare string with :meth:`AnswerGrader.check`. A hedged answer (several
different boxed answers) scores 0. A check that could not be made (the math checker starved by a
busy host, :class:`~proofgym.verify.graders.answers.MathCheckStarved`) is an error verdict, never a 0.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from proofgym.core import Trace, Verdict
from proofgym.core.errors import GraderSpecError as GraderSpecError
from proofgym.verify.graders.answers import (
    HedgedAnswer,
    MathCheckStarved,
    extract_final_answer,
    math_check,
    normalize_text,
)


@dataclass(frozen=True)
class AnswerGrader:
    """Base of the answer graders: extraction, then :meth:`matches`."""

    gold: str
    name = "answer"
    version = "1"

    def matches(self, answer: str) -> bool:
        raise NotImplementedError

    def check(self, answer: str | None) -> float:
        """1.0 when ``answer`` (already extracted) matches the reference, else 0.0 (raises
        :class:`~proofgym.verify.graders.answers.MathCheckStarved` when the check could not be made)."""
        return float(answer is not None and self.matches(answer))

    def explain(self, answer: str) -> tuple[float, str | None]:
        """:meth:`check` plus why an answer could not be checked (it then scores 0)."""
        return self.check(answer), None

    def __call__(self, trace: Trace, runtime: Any = None) -> float | Verdict:
        message = Trace.coerce(trace).final_message()
        if message is None:
            return 0.0
        try:
            answer = extract_final_answer(message)
        except HedgedAnswer:
            return 0.0
        if answer is None:
            return 0.0
        try:
            score, reason = self.explain(answer)
        except MathCheckStarved as exc:  # nothing was judged: a grader error, re-graded later
            return Verdict.failed(str(exc), grader=self.name)
        return score if reason is None else Verdict(score, error=reason, grader=self.name)

    def describe(self) -> dict[str, Any]:
        return {"grader": self.name, "version": self.version}


@dataclass(frozen=True)
class ExactMatch(AnswerGrader):
    """Equal after stripping surrounding whitespace (case and spacing matter)."""

    name = "exact"

    def matches(self, answer: str) -> bool:
        return answer.strip() == self.gold.strip()


@dataclass(frozen=True)
class NormalizedMatch(AnswerGrader):
    """Equal after Unicode (NFKC), case, whitespace and trailing-period normalisation."""

    name = "normalized"

    def matches(self, answer: str) -> bool:
        return normalize_text(answer) == normalize_text(self.gold)


@dataclass(frozen=True)
class RegexMatch(AnswerGrader):
    """The answer matches the regular expression ``gold`` (whole answer unless ``search``)."""

    search: bool = False
    ignore_case: bool = False
    name = "regex"

    def __post_init__(self) -> None:
        try:
            re.compile(self.gold)
        except re.error as exc:
            raise GraderSpecError(f"invalid regex {self.gold!r}: {exc}") from None

    def matches(self, answer: str) -> bool:
        flags = re.IGNORECASE if self.ignore_case else 0
        finder = re.search if self.search else re.fullmatch
        return finder(self.gold, answer.strip(), flags) is not None


_NUMBER_CLEAN = re.compile(r"[\s,$€£]|\\!|\\,")


def parse_number(text: str) -> float | None:
    """A number from ``1,234.5``, ``-3/4``, ``12%`` (0.12), ``1e-3``, ``\\frac{1}{2}``; else None."""
    t = _NUMBER_CLEAN.sub("", text.strip()).rstrip(".")
    frac = re.fullmatch(r"(-?)\\[dt]?frac\{(-?\d+)\}\{(-?\d+)\}", t)
    if frac:
        t = f"{frac.group(1)}{frac.group(2)}/{frac.group(3)}"
    percent = t.endswith("%")
    t = t.rstrip("%")
    try:
        value = float(Fraction(t)) if "/" in t else float(t)
    except (ValueError, ZeroDivisionError):
        return None
    return value / 100 if percent else value


@dataclass(frozen=True)
class NumericMatch(AnswerGrader):
    """Numerically equal within ``rel_tol``/``abs_tol`` (``1,000`` = ``1000.0`` = ``1e3``)."""

    rel_tol: float = 1e-6
    abs_tol: float = 1e-9
    name = "numeric"

    def matches(self, answer: str) -> bool:
        gold, got = parse_number(self.gold), parse_number(answer)
        if gold is None:
            raise GraderSpecError(f"numeric grader: the reference {self.gold!r} is not a number")
        return got is not None and math.isclose(got, gold, rel_tol=self.rel_tol, abs_tol=self.abs_tol)


@dataclass(frozen=True)
class MathMatch(AnswerGrader):
    """Mathematically equivalent (math-verify): ``1/2`` = ``0.5`` = ``\\frac{1}{2}``, ``x+1`` = ``1+x``."""

    name = "math"
    version = "math-verify-2"

    def matches(self, answer: str) -> bool:
        return math_check(self.gold, answer)[0]

    def explain(self, answer: str) -> tuple[float, str | None]:
        ok, reason = math_check(self.gold, answer)
        return float(ok), reason


GRADERS: Mapping[str, type[AnswerGrader]] = {
    g.name: g for g in (ExactMatch, NormalizedMatch, RegexMatch, NumericMatch, MathMatch)
}


def make_grader(spec: str | Mapping[str, Any], gold: str) -> AnswerGrader:
    """A grader from a task file's spec: a name (``"math"``) or ``{"type": "regex", ...options}``."""
    if isinstance(spec, str):
        kind, options = spec, {}
    elif isinstance(spec, Mapping) and isinstance(spec.get("type"), str):
        kind, options = spec["type"], {k: v for k, v in spec.items() if k != "type"}
    else:
        raise GraderSpecError(f"grader spec must be a name or {{'type': NAME, ...}}, got {spec!r}")
    if kind not in GRADERS:
        raise GraderSpecError(f"unknown grader {kind!r}; built-in graders: {sorted(GRADERS)}")
    if kind == "regex" and "pattern" in options:  # the task's answer is then an example
        gold = options.pop("pattern")
    try:
        return GRADERS[kind](str(gold), **options)
    except TypeError as exc:
        raise GraderSpecError(f"grader {kind!r}: bad options {options}: {exc}") from None
