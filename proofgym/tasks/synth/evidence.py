"""What a statement writer is given (:class:`BugEvidence`) and what one failure says about the
behaviour (:func:`observe`): the two values a failed comparison saw, the call that gave the
observed one, or the exception.

A failure is what the suite run on the buggy source kept of a failing test
(:mod:`proofgym.tasks.synth.testrun`): the exception, pytest's assertion text (``assert 3 == 4``
with its ``where 3 = f(1)`` lines: the values and the evaluated call, never the test's source)
or unittest's (``3 != 4``), and how the test first reached a bug's function (the project's
frames from the call the test made, with its arguments).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

_MESSAGE_CHARS = 200
_VALUE_CHARS = 120


@dataclass(frozen=True)
class Failure:
    """One failing test as the run on the buggy source saw it."""

    test: str  # node id (never shown: the report does not name the hidden tests)
    exception: str | None
    message: str | None  # the exception's text (pytest's assertion text for a failed assert)
    #: the project's functions from the one the test called down to the bug's (qualified
    #: names), and the arguments of that first call (shortened reprs); empty: not traced
    path: tuple[str, ...] = ()
    args: tuple[str, ...] = ()


@dataclass(frozen=True)
class BugEvidence:
    """What a writer may use: the project, the patch (never shown to the agent), per bug its
    file and function, the failing tests' output, the number of tests still passing, and the
    hidden test files (only to check that nothing of them is quoted)."""

    project: str
    patch: str
    bugs: Sequence[Mapping[str, Any]]
    failures: Sequence[Failure]
    passing: int
    hidden_sources: Sequence[bytes] = ()


@dataclass(frozen=True)
class Statement:
    title: str
    report: str
    provenance: Mapping[str, Any] = field(default_factory=dict)


class StatementWriter(Protocol):
    def write(self, evidence: BugEvidence) -> Statement: ...


def _module(path: str) -> str:
    parts = path[:-3].split("/") if path.endswith(".py") else path.split("/")
    if parts and parts[0] == "src":
        parts = parts[1:]
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts) or path


def where_the_bug_is(bugs: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(module, function) of each bug, in order, without repeats."""
    return list(dict.fromkeys((_module(str(b["file"])), str(b["function"])) for b in bugs))


_STRING = re.compile(r"""[rbuf]*('[^'\\]*(?:\\.[^'\\]*)*'|"[^"\\]*(?:\\.[^"\\]*)*")""")


def _hidden_lines(sources: Sequence[bytes]) -> set[str]:
    """The lines of the hidden tests a report must not hold: 10+ characters of code (a line of
    data alone, ``'config': {``, is what a reporter pastes as a value, not the test)."""
    out = set()
    for source in sources:
        for line in source.decode("utf-8", "replace").splitlines():
            line = line.strip()
            if len(line) >= 10 and not line.startswith(("#", "def ", "class ", "@")) and \
                    re.search(r"[A-Za-z_]", _STRING.sub("", line)) and \
                    _STRING.sub("", line).strip() not in ("None", "True", "False"):
                out.add(line)
    return out


def quotes_hidden_test(text: str, hidden_sources: Sequence[bytes]) -> bool:
    """Whether ``text`` holds a whole line (10+ characters) of a hidden test file."""
    return any(line in text for line in _hidden_lines(hidden_sources))


def hidden_names(failures: Sequence[Failure]) -> list[str]:
    """The names the failing tests' ids hold (class and function, not the file), longest first."""
    names = {part.split("[", 1)[0] for f in failures for part in f.test.split("::")[1:]}
    return sorted((n for n in names if n), key=lambda n: (-len(n), n))


def names_a_hidden_test(text: str, failures: Sequence[Failure]) -> bool:
    """Whether ``text`` holds a name of a failing (hidden) test, as a whole word."""
    return any(re.search(rf"(?<!\w){re.escape(n)}(?!\w)", text) for n in hidden_names(failures))


def without_hidden_names(text: str, failures: Sequence[Failure]) -> str:
    """``text`` with every name of a failing test (class or function) shown as ``...``."""
    for name in hidden_names(failures):
        text = re.sub(rf"(?<!\w){re.escape(name)}(?!\w)", "...", text)
    return text


_LOCAL = re.compile(r"[\w.]*<locals>\.")
_NAMES_A_TEST = re.compile(r"<[^<>]*\btest_?\w*[^<>]*>")


def clean(text: str) -> str:
    """A repr as a reporter would paste it: no addresses, and no name of a test (a name defined
    in a function, ``test_x.<locals>.cb``, shows as ``cb``, another object naming a test as
    ``<...>``)."""
    text = _LOCAL.sub("", _ADDRESS.sub("", text))  # ``test_x.<locals>.cb``: ``cb``
    return _NAMES_A_TEST.sub("<...>", text)


def short(text: str, limit: int = _VALUE_CHARS) -> str:
    text = " ".join(clean(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


@dataclass(frozen=True)
class Observation:
    """What one failure says about the behaviour: the ``observed`` and ``expected`` values and
    the ``relation`` that should hold between them (``true``/``false``: a truth check of
    ``observed``), the evaluated call that gave the observed value (pytest's ``where``), or an
    ``exception`` with its message (``raises``: an exception that was expected did not come)."""

    observed: str | None = None
    expected: str | None = None
    relation: str | None = None
    call: str | None = None
    exception: str | None = None
    message: str | None = None
    receiver: str | None = None  # the class of the object ``call`` is a method call on

    @property
    def compares(self) -> bool:
        """Whether the failure compared two values (both are known)."""
        return self.observed is not None and self.expected is not None and \
            self.relation not in (None, "true", "false")


_WHERE = re.compile(r"^\s*\+(\s+)where (.+?) = (.+)$")
_OBJECT = re.compile(r"^<(?:[\w.]+\.)?(\w+) object(?: at 0x[0-9a-f]+)?>$")
_ADDRESS = re.compile(r"\s?at 0x[0-9a-f]+")
_OPS = {ast.Eq: "==", ast.NotEq: "!=", ast.In: "in", ast.NotIn: "not in", ast.Is: "is",
        ast.IsNot: "is not", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
_DIFFERING = re.compile(r"^\s*(?:At index \d+ diff: |Full diff:\s*)?(\{.+\}|\[.+\]|\(.+\)|'.*'|\S+) != (.+)$")
_ATTRIBUTE = re.compile(r"^\s*(\w+): (.+) != (.+)$")
_REGEX_LINE = re.compile(r"^\s*(Expected regex|Actual message|Regex|Input): (.+)$")
_REGEX_KEYS = {"Expected regex": "regex", "Regex": "regex", "Actual message": "message",
               "Input": "message"}
_SPLIT = re.compile(r"^(.+?) (==|!=|not in|in|is not|is|<=|>=|<|>) (.+)$")
_UNITTEST = [(re.compile(r"^(.+) != (.+)$"), "=="), (re.compile(r"^(.+) == (.+)$"), "!="),
             (re.compile(r"^(.+) not found in (.+)$"), "in"),
             (re.compile(r"^(.+) unexpectedly found in (.+)$"), "not in"),
             (re.compile(r"^(.+) is not true$"), "true"), (re.compile(r"^(.+) is not false$"), "false"),
             (re.compile(r"^(.+) is not None$"), "is"), (re.compile(r"^unexpectedly None$"), "is not")]


def _where(lines: Sequence[str]) -> tuple[str | None, str | None, str | None]:
    """(value, call, receiver class) of pytest's first top-level ``where`` that is a call, with
    the receiver of a method from the nested one (``get('b')`` with ``get = Munch({...}).get``:
    ``Munch({...}).get('b')``; a receiver whose repr is no expression gives its class)."""
    value = call = receiver = None
    depth = 0
    for line in lines:
        m = _WHERE.match(line)
        if m is None:
            continue
        indent = len(m.group(1))
        if call is None:
            if "(" in m.group(3):
                value, call, depth = m.group(2), m.group(3), indent
            continue
        if indent <= depth:
            break
        name, bound = m.group(2), m.group(3)
        if call.startswith(name + "(") and bound.endswith("." + name):
            obj_repr = _ADDRESS.sub("", bound[:-len(name) - 1])
            obj = _OBJECT.match(obj_repr)
            if obj:
                receiver = obj.group(1)
            elif len(obj_repr) <= 60 and not obj_repr.startswith("<"):
                call = f"{obj_repr}.{call}"
            break
    return value, (short(call) if call else None), receiver


def _values(line: str) -> tuple[str, str | None, str] | None:
    """(left, right, relation) of pytest's ``assert ...`` line (values are reprs)."""
    try:
        node = ast.parse(line).body[0]
    except SyntaxError:  # a repr that is no expression (``<function f>``)
        if line.startswith("assert not "):
            return line[len("assert not "):], None, "false"
        m = _SPLIT.match(line[len("assert "):])
        return (m.group(1), m.group(3), m.group(2)) if m else (line[len("assert "):], None, "true")
    test = node.test if isinstance(node, ast.Assert) else None
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _OPS:
        left = ast.get_source_segment(line, test.left) or ""
        right = ast.get_source_segment(line, test.comparators[0]) or ""
        return left, right, _OPS[type(test.ops[0])]
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return ast.get_source_segment(line, test.operand) or "", None, "false"
    if test is not None:
        return ast.get_source_segment(line, test) or "", None, "true"
    return None


def observe(failure: Failure) -> Observation:
    """Read a failure: for a failed comparison its two values (and the call), otherwise the
    exception and its first message line."""
    text = (failure.message or "").strip()
    lines = text.splitlines()
    first = lines[0].strip() if lines else ""
    if failure.exception == "Failed" and first.startswith("DID NOT RAISE"):
        raised = re.sub(r"^<class '(?:[\w.]+\.)?(\w+)'>$", r"\1", first[len("DID NOT RAISE"):].strip())
        return Observation(relation="raises", exception=raised or "an exception")
    m = re.match(r"^(\w+) not raised(?: by \w+)?$", first)
    if failure.exception == "AssertionError" and m:  # unittest's assertRaises
        return Observation(relation="raises", exception=m.group(1))
    if failure.exception != "AssertionError":
        return Observation(exception=failure.exception or "an error",
                           message=clean(first)[:_MESSAGE_CHARS] or None)
    at = next((i for i, line in enumerate(lines) if line.startswith("assert ")), None)
    if at is not None:
        value, call, receiver = _where(lines[at + 1:])
        found = _values(lines[at].strip())
        if found is None:
            return Observation(call=call, exception="AssertionError", receiver=receiver)
        left, right, relation = found
        if relation == "==" and right is not None and "..." in left and short(left) == short(right):
            diff = next((m for m in map(_DIFFERING.match, lines[at + 1:]) if m), None)
            attr = next((m for m in map(_ATTRIBUTE.match, lines[at + 1:]) if m), None)
            if diff:  # pytest shortened both sides alike: the item that differs says more
                left, right = diff.group(1), diff.group(2)
            elif attr:  # a dataclass or attrs instance: the attribute that differs
                left, right = f"{attr.group(1)}={attr.group(2)}", f"{attr.group(1)}={attr.group(3)}"
            else:  # nothing tells them apart: no values to state
                return Observation(call=call, exception="AssertionError", receiver=receiver)
        if right is not None and value is not None and value == right.strip() and \
                value != left.strip() and relation in ("==", "!="):
            left, right = right, left  # ``assert expected == f(x)``: the computed side is right
        return Observation(short(left), short(right) if right is not None else None, relation,
                           call, receiver=receiver)
    if first == "Regex pattern did not match.":  # pytest.raises(..., match=...)
        found = {_REGEX_KEYS[m.group(1)]: m.group(2) for m in map(_REGEX_LINE.match, lines[1:]) if m}
        if "regex" in found and "message" in found:
            return Observation(short(found["message"]), short(found["regex"]), "matches")
    for pattern, relation in _UNITTEST:  # unittest: "first != second", "x not found in y"...
        m = pattern.match(first)
        if m:
            groups = m.groups()
            if relation == "is":
                return Observation(short(groups[0]), "None", "is")
            if relation == "is not":
                return Observation("None", "None", "is not")
            return Observation(short(groups[0]), short(groups[1]) if len(groups) > 1 else None,
                               relation)
    return Observation(exception="AssertionError", message=clean(first)[:_MESSAGE_CHARS] or None)


__all__ = [
    "BugEvidence",
    "Failure",
    "Observation",
    "Statement",
    "StatementWriter",
    "clean",
    "hidden_names",
    "names_a_hidden_test",
    "observe",
    "quotes_hidden_test",
    "short",
    "where_the_bug_is",
    "without_hidden_names",
]
