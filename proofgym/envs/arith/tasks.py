"""Procedurally generated arithmetic and algebra word problems, seeded by index."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from proofgym.core import ActionScript, Task, TaskSpec, ToolCallAction, Trace, TurnCompleteAction, Verdict
from proofgym.verify import HedgedAnswer, MathCheckStarved, extract_final_answer, math_equivalent

LEVELS = (1, 2, 3, 4)

INSTRUCTIONS = ("Solve the problem. You may use the calculator tool if it is available. "
                "End your reply with the final answer in the form \\boxed{ANSWER}; give an exact "
                "value (an integer or a fraction such as 7/3).")


def fraction_text(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


@dataclass(frozen=True)
class ArithTask(Task):
    """One word problem with its exact answer, a calculator expression that computes it, and a
    known-wrong answer (close to the right one, so a lenient grader would be caught)."""

    task_id: str
    level: int
    question: str
    answer: str
    expression: str
    wrong_answer: str

    verifier_version = "arith-1"

    @property
    def id(self) -> str:
        return self.task_id

    def get_spec(self) -> TaskSpec:
        return TaskSpec(f"{self.question}\n\n{INSTRUCTIONS}", metadata={"level": self.level})

    def verify(self, trace: Trace, runtime: Any) -> Verdict:
        used_calculator = float(any(c.tool_name == "calculator" for c in trace.tool_calls()))
        message = trace.final_message()
        if message is None:
            return Verdict(0.0, {"correct": 0.0}, {"answered": 0.0, "used_calculator": used_calculator})
        try:
            candidate = extract_final_answer(message)
        except HedgedAnswer:
            return Verdict(0.0, {"correct": 0.0}, {"answered": 1.0, "hedged": 1.0,
                                                   "used_calculator": used_calculator})
        answered = float(candidate is not None)
        try:
            correct = float(candidate is not None and math_equivalent(self.answer, candidate))
        except MathCheckStarved as exc:  # the host starved the checker: not judged, never a 0
            return Verdict.failed(str(exc), answered=answered, used_calculator=used_calculator)
        return Verdict(correct, {"correct": correct},
                       {"answered": answered, "used_calculator": used_calculator})

    def reference_solution(self) -> ActionScript:
        return [ToolCallAction("calculator", {"expression": self.expression}),
                TurnCompleteAction(f"Computing {self.expression} gives the result. "
                                   f"\\boxed{{{self.answer}}}")]

    def controls(self) -> Mapping[str, ActionScript]:
        return {
            "known_wrong": [TurnCompleteAction(f"\\boxed{{{self.wrong_answer}}}")],
            "no_answer": [TurnCompleteAction("I am not sure how to solve this.")],
            "empty": [TurnCompleteAction("")],
            "hedge": [TurnCompleteAction(f"Either \\boxed{{{self.wrong_answer}}} or "
                                         f"\\boxed{{{self.answer}}}")],
            "echo_question": [TurnCompleteAction(self.question)],
        }

    def content(self) -> Mapping[str, Any]:
        return {"id": self.task_id, "level": self.level, "question": self.question,
                "answer": self.answer, "instructions": INSTRUCTIONS}


def make_task(index: int, *, seed: int = 0, level: int | None = None) -> ArithTask:
    """The ``index``-th problem of the stream seeded by ``seed`` (independent of other indices)."""
    level = level if level is not None else LEVELS[index % len(LEVELS)]
    digest = hashlib.sha256(f"proofgym-arith:{seed}:{index}:{level}".encode()).digest()
    rng = np.random.Generator(np.random.PCG64(int.from_bytes(digest[:8], "little")))
    question, answer, expression = _GENERATORS[level](rng)
    wrong = answer + 1 if answer.denominator == 1 else answer + Fraction(1, answer.denominator)
    return ArithTask(f"arith-l{level}-s{seed}-{index:05d}", level, question, fraction_text(answer),
                     expression, fraction_text(wrong))


def _r(rng: np.random.Generator, lo: int, hi: int) -> int:
    return int(rng.integers(lo, hi + 1))


def _coefficient(k: int, var: str) -> str:
    return {1: var, -1: f"-{var}", 0: "0"}.get(k, f"{k}{var}")


def _signed_term(k: int, var: str) -> str:
    """`` + 3y`` / `` - y`` style, for the terms after the first."""
    return f"{'+' if k >= 0 else '-'} {_coefficient(abs(k), var)}"


def _linear(k: int, var: str, constant: int) -> str:
    if k == 0:
        return str(constant)
    head = _coefficient(k, var)
    if constant == 0:
        return head
    return f"{head} {'+' if constant > 0 else '-'} {abs(constant)}"


_NAMES = ("Ana", "Ben", "Chen", "Dara", "Emeka", "Farah", "Goran", "Hana", "Ines", "Jon")
_ITEMS = ("apples", "marbles", "stickers", "pencils", "cookies", "stamps", "coins", "cards")


def _level1(rng: np.random.Generator) -> tuple[str, Fraction, str]:
    name, item = _NAMES[_r(rng, 0, 9)], _ITEMS[_r(rng, 0, 7)]
    boxes, per_box, given, found = _r(rng, 3, 12), _r(rng, 4, 25), _r(rng, 1, 30), _r(rng, 1, 20)
    q = (f"{name} buys {boxes} boxes of {item} with {per_box} {item} in each box, gives {given} "
         f"{item} to a friend, and then finds {found} more. How many {item} does {name} have now?")
    expr = f"{boxes} * {per_box} - {given} + {found}"
    return q, Fraction(boxes * per_box - given + found), expr


def _level2(rng: np.random.Generator) -> tuple[str, Fraction, str]:
    name = _NAMES[_r(rng, 0, 9)]
    liters, percent, drained, people = _r(rng, 20, 200), _r(rng, 1, 19) * 5, _r(rng, 1, 15), _r(rng, 2, 9)
    filled = Fraction(liters * percent, 100)
    while filled - drained <= 0:
        drained = max(1, drained // 2)
        if filled - drained <= 0:
            percent, filled = 100, Fraction(liters)
    answer = (filled - drained) / people
    q = (f"{name}'s tank holds {liters} liters and is filled to {percent}% of its capacity. "
         f"{drained} liters are drained, and the rest is shared equally among {people} people. "
         "How many liters does each person get?")
    return q, answer, f"({liters} * {percent} / 100 - {drained}) / {people}"


def _level3(rng: np.random.Generator) -> tuple[str, Fraction, str]:
    a, c = _r(rng, 2, 12), _r(rng, -9, 9)
    while c == a:
        c = _r(rng, -9, 9)
    b, d = _r(rng, -40, 40), _r(rng, -40, 40)
    answer = Fraction(d - b, a - c)
    q = f"Solve for x: {_linear(a, 'x', b)} = {_linear(c, 'x', d)}."
    return q, answer, f"({d} - ({b})) / ({a} - ({c}))"


def _level4(rng: np.random.Generator) -> tuple[str, Fraction, str]:
    while True:
        a, b, c, d = (_r(rng, -9, 9) for _ in range(4))
        det = a * d - b * c
        if det != 0 and 0 not in (a, d):
            break
    e, f = _r(rng, -50, 50), _r(rng, -50, 50)
    x = Fraction(e * d - b * f, det)
    y = Fraction(a * f - e * c, det)
    q = (f"The numbers x and y satisfy {_linear(a, 'x', 0)} {_signed_term(b, 'y')} = {e} and "
         f"{_linear(c, 'x', 0)} {_signed_term(d, 'y')} = {f}. What is x + y?")
    expr = f"(({e}) * ({d}) - ({b}) * ({f}) + ({a}) * ({f}) - ({e}) * ({c})) / ({det})"
    return q, x + y, expr


_GENERATORS = {1: _level1, 2: _level2, 3: _level3, 4: _level4}
