"""Graders for final answers: extraction, normalised match, and math equivalence (math-verify)."""

from __future__ import annotations

import json
import logging
import os
import re
import select
import subprocess
import sys
import threading
import unicodedata


class _DisabledTimeoutNotice(logging.Filter):
    """math-verify warns, once per call, when its signal timeout is off (outside a main thread);
    proofgym runs it in a worker process with a hard limit instead (:func:`math_check`)."""

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


#: Longest answer math-verify is asked to parse; longer ones score 0 (a policy must not be able
#: to stall or flood the grader with its output).
MAX_MATH_ANSWER_CHARS = 512
#: Hard limit on one equivalence check (math-verify's own limits are 5 s per parse and per check).
MATH_TIMEOUT_S = 15.0

_WORKER = r"""
import json, logging, sys
logging.disable(logging.WARNING)
from math_verify import parse, verify
def as_math(t):
    t = t.strip()
    return t if t.startswith("$") else "$" + t + "$"
sys.stdout.write("ready\n"); sys.stdout.flush()
for line in sys.stdin:
    gold, answer = json.loads(line)
    try:
        g = parse(as_math(gold), parsing_timeout=5)
        a = parse(as_math(answer), parsing_timeout=5)
        out = [bool(g and a and verify(g, a, timeout_seconds=5)), None]
    except Exception as exc:
        out = [False, "math-verify raised " + type(exc).__name__ + ": " + str(exc)[:200]]
    sys.stdout.write(json.dumps(out) + "\n"); sys.stdout.flush()
"""


class _MathWorker:
    """math-verify in a child process of its own: its signal timeouts work there (they need a
    main thread), and an answer that stalls it past :data:`MATH_TIMEOUT_S` gets the process
    killed, from whatever thread asked. One per process (a forked child starts its own)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[str] | None = None
        self._owner = os.getpid()

    def check(self, gold: str, answer: str, timeout_s: float) -> tuple[bool, str | None]:
        with self._lock:
            if self._owner != os.getpid():  # forked: the pipes belong to the parent's worker
                self._proc, self._owner = None, os.getpid()
            proc = self._proc if self._proc is not None and self._proc.poll() is None else self._start()
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(json.dumps([gold, answer]) + "\n")
            proc.stdin.flush()
            ready, _, _ = select.select([proc.stdout], [], [], timeout_s)
            line = proc.stdout.readline() if ready else ""
            if not line:
                self._stop()
                return False, f"math-verify did not finish within {timeout_s:g} s (stopped)"
            ok, reason = json.loads(line)
            return bool(ok), reason

    def _start(self) -> subprocess.Popen[str]:
        self._stop()
        proc = subprocess.Popen([sys.executable, "-I", "-c", _WORKER], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                bufsize=1)
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 120.0)
        if not ready or proc.stdout.readline().strip() != "ready":
            proc.kill()
            proc.wait()
            raise RuntimeError("the math-verify worker process did not start (is math-verify "
                               "installed for this interpreter?)")
        self._proc = proc
        return proc

    def _stop(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None


_MATH = _MathWorker()


def math_check(gold: str, answer: str, *, timeout_s: float = MATH_TIMEOUT_S) -> tuple[bool, str | None]:
    """Whether ``answer`` is mathematically equal to ``gold``, and why not when it could not be
    checked: an answer over :data:`MAX_MATH_ANSWER_CHARS`, or one math-verify could not finish
    within ``timeout_s`` (``9^{9^{9}}``). Both are wrong answers, not grader errors: the answer
    is the agent's. A worker that cannot start raises ``RuntimeError`` (a host fault)."""
    if len(answer) > MAX_MATH_ANSWER_CHARS:
        return False, f"the answer has {len(answer)} characters, over {MAX_MATH_ANSWER_CHARS}"
    return _MATH.check(gold, answer, timeout_s)


def math_equivalent(gold: str, answer: str) -> bool:
    """Whether ``answer`` is mathematically equal to ``gold`` (``0.5 == 1/2 == \\frac{1}{2}``);
    an answer that is too long or cannot be checked in time is not (see :func:`math_check`)."""
    return math_check(gold, answer)[0]
