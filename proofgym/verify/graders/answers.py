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
import time
import unicodedata
from typing import Any

from proofgym.core.errors import ConfigError
from proofgym.core.errors import HedgedAnswer as HedgedAnswer
from proofgym.core.errors import MathCheckStarved as MathCheckStarved


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
#: CPU seconds one equivalence check may use (parsing both sides and comparing them). An answer
#: that needs more is too costly to check: a scored 0 with the reason. CPU time, not wall time,
#: so a busy host cannot make a correct answer run out of it.
MATH_CPU_S = 5.0
#: Wall-clock limit on one check. Reaching it before the checker has used :data:`MATH_CPU_S` of
#: CPU means the checker was starved (a busy host, a stopped process), not that the answer is
#: costly: :class:`MathCheckStarved`, a grader error that a re-grade repeats, never a 0.
MATH_TIMEOUT_S = 15.0
#: How often a waiting check looks at the checker's CPU time.
_POLL_S = 0.25


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of process ``pid`` (``/proc/<pid>/stat``), ``None`` if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(b")") + 2:].split()  # after "pid (comm) ": comm may hold spaces
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK  # utime, stime (fields 14, 15)


_CLK_TCK = os.sysconf("SC_CLK_TCK")


def _death(status: int | None) -> str:
    """How a reaped checker ended, from its wait status."""
    if status is None:
        return "it was gone before it could be reaped"
    code = os.waitstatus_to_exitcode(status)
    return f"killed by signal {-code}" if code < 0 else f"exit code {code}"


def _serve(requests: int, replies: int) -> None:
    """The worker's loop (in a forked child, math-verify already imported): one JSON request
    per line in, one ``[ok, reason]`` line out, until the parent closes its end.

    math-verify's own time limits are off: they are ``SIGALRM`` (wall clock) and end in a
    silent "not equal", so on a busy host they scored correct answers 0. The parent bounds the
    check instead, by this process's CPU time (:func:`math_check`)."""
    from math_verify import parse, verify  # imported by _warm_up before the fork: no cost here

    logging.disable(logging.WARNING)
    with os.fdopen(requests, "r") as inbox, os.fdopen(replies, "w") as outbox:
        for line in inbox:
            gold, answer = json.loads(line)
            try:
                g = parse(_as_math(gold), parsing_timeout=None)  # type: ignore[arg-type]
                a = parse(_as_math(answer), parsing_timeout=None)  # type: ignore[arg-type]
                out = [bool(g and a and verify(g, a, timeout_seconds=None)), None]
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
    """math-verify in a forked child process, so that a check can be stopped from whatever
    thread asked: the process is killed once it has used its CPU budget (the answer is too
    costly, a scored 0) or once the wall-clock limit passes first (the host starved it,
    :class:`MathCheckStarved`). One per process: a process forked from one that has a worker
    forks its own at once (while it is still single-threaded)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = 0
        self._send: Any = None
        self._recv: Any = None
        self._owner = os.getpid()
        self._forking = False

    @property
    def pid(self) -> int:
        """The checker process's pid (0 before the first check in this process)."""
        return self._pid if self._owner == os.getpid() else 0

    def check(self, gold: str, answer: str, timeout_s: float, cpu_s: float) -> tuple[bool, str | None]:
        with self._lock:
            died = ""
            for _ in range(2):
                result = self._check_once(gold, answer, timeout_s, cpu_s)
                if isinstance(result, tuple):
                    return result
                died = result
            # A checker that dies once may have been killed from outside (the OOM killer on a
            # busy host); one that dies again on the same answer dies of the answer.
            return False, f"math-verify's checker died twice on this answer ({died})"

    def _check_once(self, gold: str, answer: str, timeout_s: float,
                    cpu_s: float) -> tuple[bool, str | None] | str:
        """The verdict, or why the checker died without one."""
        if self._owner != os.getpid() or not self._pid:
            self._start()
        # idle until now: the CPU it has used so far is the cost of earlier checks
        cpu0 = _cpu_seconds(self._pid)
        try:
            self._send.write(json.dumps([gold, answer]) + "\n")
            self._send.flush()
        except OSError:  # the worker died between checks: start another, once
            self._start()
            cpu0 = _cpu_seconds(self._pid)
            self._send.write(json.dumps([gold, answer]) + "\n")
            self._send.flush()
        pid, start = self._pid, time.monotonic()
        cpu0 = cpu0 or 0.0
        while True:
            left = start + timeout_s - time.monotonic()
            ready, _, _ = select.select([self._recv], [], [], max(0.0, min(_POLL_S, left)))
            if ready:
                line = self._recv.readline()
                if line:
                    ok, reason = json.loads(line)
                    return bool(ok), reason
                return _death(self._stop())
            used = (_cpu_seconds(pid) or cpu0) - cpu0
            if used >= cpu_s:
                self._stop()
                return False, (f"math-verify used its CPU budget of {cpu_s:g} s on this answer "
                               "without finishing (stopped): the answer is too costly to check")
            if left <= 0:
                self._stop()
                waited = time.monotonic() - start
                raise MathCheckStarved(
                    f"math check not judged: the checker timed out after {waited:.1f} s of wall "
                    f"time having had only {used:.2f} s of CPU (its budget is {cpu_s:g} s), so the "
                    "host was busy or the checker was stopped; re-grade this answer")

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

    def _stop(self) -> int | None:
        """Kill and reap the worker; its wait status (``None`` if there was none to reap)."""
        status = None
        if self._owner == os.getpid() and self._pid:
            with contextlib.suppress(ProcessLookupError):  # already dead: still reap it
                os.kill(self._pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                status = os.waitpid(self._pid, 0)[1]
        for f in (self._send, self._recv):
            if f is not None:
                try:
                    f.close()
                except OSError:
                    continue
        self._pid, self._send, self._recv = 0, None, None
        return status

    def after_fork(self) -> None:
        """In a freshly forked child: the parent's worker is not ours; ours starts at first use.

        Never here: forking inside an at-fork handler deadlocks when a handler registered after
        this one has yet to re-initialise its lock (``concurrent.futures.thread`` acquires its
        shutdown lock before every fork and re-initialises it in the child; imported after this
        module, its handler runs after ours, so a fork from ours waits on that held lock)."""
        if self._forking:  # this is the worker itself
            return
        self._lock = threading.Lock()
        for f in (self._send, self._recv):
            if f is not None:
                try:
                    f.close()
                except OSError:
                    continue
        self._pid, self._send, self._recv, self._owner = 0, None, None, os.getpid()


_MATH = _MathWorker()
os.register_at_fork(after_in_child=_MATH.after_fork)


def math_check(gold: str, answer: str, *, timeout_s: float | None = None,
               cpu_s: float | None = None) -> tuple[bool, str | None]:
    """Whether ``answer`` is mathematically equal to ``gold``, and why not when it could not be
    checked: an answer over :data:`MAX_MATH_ANSWER_CHARS`, or one on which the checker used its
    ``cpu_s`` seconds of CPU without finishing (``9^{9^{9}}``). Both are wrong answers, not grader
    errors: the answer is the agent's, and the same answer costs the same CPU on any host (an
    error would be re-graded forever, and would let a policy trade a 0 for an unscored episode).

    Raises :class:`MathCheckStarved` when ``timeout_s`` of wall time pass before the checker
    has had ``cpu_s`` of CPU: the host was busy, nothing was judged (never a 0). The limits
    default to :data:`MATH_TIMEOUT_S` and :data:`MATH_CPU_S` as they are when called."""
    timeout_s = MATH_TIMEOUT_S if timeout_s is None else timeout_s
    cpu_s = MATH_CPU_S if cpu_s is None else cpu_s
    if not 0 < cpu_s <= timeout_s:
        raise ConfigError(f"math_check needs 0 < cpu_s <= timeout_s (got cpu_s={cpu_s!r}, "
                          f"timeout_s={timeout_s!r}): a CPU budget over the wall-clock limit could "
                          "never be used, so every costly answer would look starved")
    if len(answer) > MAX_MATH_ANSWER_CHARS:
        return False, f"the answer has {len(answer)} characters, over {MAX_MATH_ANSWER_CHARS}"
    return _MATH.check(gold, answer, timeout_s, cpu_s)


def math_equivalent(gold: str, answer: str) -> bool:
    """Whether ``answer`` is mathematically equal to ``gold`` (``0.5 == 1/2 == \\frac{1}{2}``);
    an answer that is too long or too costly to check is not (see :func:`math_check`, which
    also raises :class:`MathCheckStarved` when the host starved the check)."""
    return math_check(gold, answer)[0]
