"""Graders for final answers: extraction, normalised match, and math equivalence (math-verify)."""

from __future__ import annotations

import logging
import re
import threading
import unicodedata

from math_verify import parse, verify


class _DisabledTimeoutNotice(logging.Filter):
    """Off the main thread we disable math-verify's signal timeout on purpose (see
    :func:`math_equivalent`); its warning about that, once per call, would drown a run's output."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Timeout is disabled" not in record.getMessage()


for _name in ("math_verify.grader", "math_verify.parser"):
    logging.getLogger(_name).addFilter(_DisabledTimeoutNotice())

_ANSWER_LINE = re.compile(r"(?:final\s+answer|answer)\s*(?:is|:|=)\s*(.+)", re.IGNORECASE)


def boxed_contents(text: str) -> list[str]:
    """Contents of every ``\\boxed{...}`` in ``text``, with nested braces balanced."""
    found: list[str] = []
    start = 0
    while (i := text.find("\\boxed{", start)) != -1:
        depth, j = 1, i + len("\\boxed{")
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        if depth:  # unbalanced: not a complete answer
            break
        found.append(text[i + len("\\boxed{"): j - 1].strip())
        start = j
    return found


class HedgedAnswer(ValueError):
    """The message commits to more than one distinct final answer."""


def extract_final_answer(message: str) -> str | None:
    """The answer a message commits to: its ``\\boxed{}`` content, else an ``Answer: ...`` line,
    else the whole message when it is short. Several *different* boxed answers are a hedge and
    raise :class:`HedgedAnswer` (listing candidates must not earn credit)."""
    boxes = boxed_contents(message)
    if boxes:
        distinct = {normalize_text(b) for b in boxes}
        if len(distinct) > 1:
            raise HedgedAnswer(f"{len(distinct)} different boxed answers: {sorted(distinct)}")
        return boxes[-1]
    lines = [m.group(1).strip().rstrip(".") for m in _ANSWER_LINE.finditer(message)]
    if lines:
        if len({normalize_text(x) for x in lines}) > 1:
            raise HedgedAnswer(f"{len(lines)} different answer lines")
        return lines[-1]
    stripped = message.strip()
    return stripped if stripped and len(stripped) <= 64 else None


def normalize_text(text: str) -> str:
    """Case-, width- and whitespace-insensitive form, for exact-match grading."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(text.replace("$", " ").split()).strip(" .")


def math_equivalent(gold: str, answer: str) -> bool:
    """Whether ``answer`` is mathematically equal to ``gold`` (``0.5 == 1/2 == \\frac{1}{2}``).

    math-verify times out with ``signal.alarm``, which exists only in the main thread; elsewhere
    the caller's timeout (the verifier pool's) is the guard.
    """
    in_main = threading.current_thread() is threading.main_thread()
    timeout = 5 if in_main else None
    gold_parsed = parse(_as_math(gold), parsing_timeout=timeout)
    answer_parsed = parse(_as_math(answer), parsing_timeout=timeout)
    if not gold_parsed or not answer_parsed:
        return False
    return bool(verify(gold_parsed, answer_parsed, timeout_seconds=timeout))


def _as_math(text: str) -> str:
    text = text.strip()
    return text if text.startswith("$") else f"${text}$"
