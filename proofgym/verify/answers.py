"""Graders for final answers: extraction, normalised match, and math equivalence (math-verify)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import select
import signal
import threading
import unicodedata
from typing import Any

from proofgym.core.errors import ProofgymError


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


class HedgedAnswer(ProofgymError, ValueError):
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

def _serve(requests: int, replies: int) -> None:
    """The worker's loop (in a forked child, math-verify already imported): one JSON request
    per line in, one ``[ok, reason]`` line out, until the parent closes its end."""
    from math_verify import parse, verify  # imported by _warm_up before the fork: no cost here

    logging.disable(logging.WARNING)
    with os.fdopen(requests, "r") as inbox, os.fdopen(replies, "w") as outbox:
        for line in inbox:
            gold, answer = json.loads(line)
            try:
                g = parse(_as_math(gold), parsing_timeout=5)
                a = parse(_as_math(answer), parsing_timeout=5)
                out = [bool(g and a and verify(g, a, timeout_seconds=5)), None]
            except Exception as exc:
                out = [False, f"math-verify raised {type(exc).__name__}: {str(exc)[:200]}"]
            outbox.write(json.dumps(out) + "\n")
            outbox.flush()


_WARM = False


def _warm_up() -> None:
    """math-verify builds its parsers on first use (about a second): do it here, on a constant,
    so that every worker forked from now on (and every process forked from this one) starts warm."""
    global _WARM
    if not _WARM:
        # imported here, not at module level: a process that only builds tasks (the CLI's main
        # process; graders run in the pool) never pays math-verify's import (about a second)
        from math_verify import parse, verify

        verify(parse("$1/2$", parsing_timeout=None), parse("$0.5$", parsing_timeout=None),
               timeout_seconds=None)
        _WARM = True


def _as_math(text: str) -> str:
    text = text.strip()
    return text if text.startswith("$") else f"${text}$"


class _MathWorker:
    """math-verify in a forked child process: its signal timeouts work there (they need a main
    thread), and an answer that stalls it past :data:`MATH_TIMEOUT_S` gets the process killed,
    from whatever thread asked. One per process: a process forked from one that has a worker
    forks its own at once (while it is still single-threaded)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = 0
        self._send: Any = None
        self._recv: Any = None
        self._owner = os.getpid()
        self._forking = False

    def check(self, gold: str, answer: str, timeout_s: float) -> tuple[bool, str | None]:
        with self._lock:
            if self._owner != os.getpid() or not self._pid:
                self._start()
            try:
                self._send.write(json.dumps([gold, answer]) + "\n")
                self._send.flush()
            except OSError:  # the worker died between checks: start another, once
                self._start()
                self._send.write(json.dumps([gold, answer]) + "\n")
                self._send.flush()
            ready, _, _ = select.select([self._recv], [], [], timeout_s)
            line = self._recv.readline() if ready else ""
            if not line:
                self._stop()
                return False, f"math-verify did not finish within {timeout_s:g} s (stopped)"
            ok, reason = json.loads(line)
            return bool(ok), reason

    def _start(self) -> None:
        self._stop()
        _warm_up()
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        self._forking = True
        try:
            pid = os.fork()
        finally:
            self._forking = False
        if pid == 0:  # the worker: nothing of the parent's but its two pipe ends
            code = 0
            try:
                keep = {req_r, rep_w}
                for fd in (int(n) for n in os.listdir("/proc/self/fd")):
                    if fd > 2 and fd not in keep:
                        try:
                            os.close(fd)
                        except OSError:
                            continue
                _serve(req_r, rep_w)
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        os.close(req_r)
        os.close(rep_w)
        self._pid, self._owner = pid, os.getpid()
        self._send = os.fdopen(req_w, "w")
        self._recv = os.fdopen(rep_r, "r")

    def _stop(self) -> None:
        if self._owner == os.getpid() and self._pid:
            with contextlib.suppress(ProcessLookupError, ChildProcessError):  # already gone
                os.kill(self._pid, signal.SIGKILL)
                os.waitpid(self._pid, 0)
        for f in (self._send, self._recv):
            if f is not None:
                try:
                    f.close()
                except OSError:
                    continue
        self._pid, self._send, self._recv = 0, None, None

    def after_fork(self) -> None:
        """In a freshly forked child: the parent's worker is not ours; start our own now, while
        this process has one thread, if the parent had one (else at first use)."""
        if self._forking:  # this is the worker itself
            return
        had = bool(self._pid)
        self._lock = threading.Lock()
        for f in (self._send, self._recv):
            if f is not None:
                try:
                    f.close()
                except OSError:
                    continue
        self._pid, self._send, self._recv, self._owner = 0, None, None, os.getpid()
        if had:
            self._start()


_MATH = _MathWorker()
os.register_at_fork(after_in_child=_MATH.after_fork)


def math_check(gold: str, answer: str, *, timeout_s: float = MATH_TIMEOUT_S) -> tuple[bool, str | None]:
    """Whether ``answer`` is mathematically equal to ``gold``, and why not when it could not be
    checked: an answer over :data:`MAX_MATH_ANSWER_CHARS`, or one math-verify could not finish
    within ``timeout_s`` (``9^{9^{9}}``). Both are wrong answers, not grader errors: the answer
    is the agent's."""
    if len(answer) > MAX_MATH_ANSWER_CHARS:
        return False, f"the answer has {len(answer)} characters, over {MAX_MATH_ANSWER_CHARS}"
    return _MATH.check(gold, answer, timeout_s)


def math_equivalent(gold: str, answer: str) -> bool:
    """Whether ``answer`` is mathematically equal to ``gold`` (``0.5 == 1/2 == \\frac{1}{2}``);
    an answer that is too long or cannot be checked in time is not (see :func:`math_check`)."""
    return math_check(gold, answer)[0]
