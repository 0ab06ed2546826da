"""Bug reports a person would write, from the bug's diff and the failing tests' output.

A :class:`StatementWriter` turns a :class:`BugEvidence` (the patch, where the bug is, each failing
test's exception and message) into a :class:`Statement`; the statement carries ``provenance``
(which writer, which model, which prompt), recorded in the task's record.

* :class:`OfflineWriter` (the default): the observed versus the expected behaviour read from the
  failure itself (``assert 3 == 4`` with pytest's ``where 3 = f(x)``: "``f(x)`` gives ``3``;
  ``4`` was expected"), the exception and its message otherwise, and where the behaviour lives
  (the module and function the patch changed, never one it did not).
* :class:`OpenAIWriter`: any OpenAI-compatible endpoint writes the report from the diff and the
  failing output (SWE-smith's recipe).

Neither quotes the hidden tests: a sentence holding a line of a hidden test file is left out
(:func:`quotes_hidden_test`).
"""

from __future__ import annotations

import ast
import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from proofgym.core.errors import StatementError as StatementError

_MESSAGE_CHARS = 200
_VALUE_CHARS = 120


@dataclass(frozen=True)
class Failure:
    """One failing test as the screening run saw it."""

    test: str  # node id
    exception: str | None
    message: str | None  # the exception's text (pytest's assertion text for a failed assert)


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


def _hidden_lines(sources: Sequence[bytes]) -> set[str]:
    out = set()
    for source in sources:
        for line in source.decode("utf-8", "replace").splitlines():
            line = line.strip()
            if len(line) >= 10 and not line.startswith(("#", "def ", "class ", "@")):
                out.add(line)
    return out


def quotes_hidden_test(text: str, hidden_sources: Sequence[bytes]) -> bool:
    """Whether ``text`` holds a whole line (10+ characters) of a hidden test file."""
    return any(line in text for line in _hidden_lines(hidden_sources))


def _short(text: str, limit: int = _VALUE_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


@dataclass(frozen=True)
class Observation:
    """What one failure says about the behaviour: ``observed``/``expected`` values, the
    relation that should hold, the expression that gave the observed value (pytest's
    ``where``), or an exception with its message."""

    observed: str | None = None
    expected: str | None = None
    relation: str | None = None
    call: str | None = None
    exception: str | None = None
    message: str | None = None


_WHERE = re.compile(r"^\s*\+\s+where (.+?) = (.+)$")


def observe(failure: Failure) -> Observation:
    """Read a failure: for ``assert L op R`` the two values, otherwise the exception."""
    text = (failure.message or "").strip()
    first = text.splitlines()[0].strip() if text else ""
    if failure.exception == "AssertionError" and first.startswith("assert "):
        call = None
        for line in text.splitlines()[1:]:
            m = _WHERE.match(line)
            if m and not line.lstrip().startswith("+    "):
                call = _short(m.group(2))
                break
        try:
            node = ast.parse(first).body[0]
        except SyntaxError:
            return Observation(call=call, exception="AssertionError")
        test = node.test if isinstance(node, ast.Assert) else None
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            relation = {ast.Eq: "==", ast.NotEq: "!=", ast.In: "in", ast.NotIn: "not in",
                        ast.Is: "is", ast.IsNot: "is not", ast.Lt: "<", ast.LtE: "<=",
                        ast.Gt: ">", ast.GtE: ">="}.get(type(test.ops[0]))
            left, right = ast.get_source_segment(first, test.left), \
                ast.get_source_segment(first, test.comparators[0])
            return Observation(_short(left or ""), _short(right or ""), relation, call)
        if test is not None:
            return Observation(_short(ast.get_source_segment(first, test) or ""), None, "true", call)
        return Observation(exception="AssertionError")
    message = first[:_MESSAGE_CHARS] if first else None
    return Observation(exception=failure.exception or "an error", message=message)


def _sentence(obs: Observation) -> str:
    subject = f"`{obs.call}`" if obs.call else "the result"
    if obs.relation in ("==", "is") and obs.observed is not None:
        return f"{subject} gives `{obs.observed}`, but `{obs.expected}` is expected"
    if obs.relation in ("!=", "is not"):
        return f"{subject} gives `{obs.observed}`, which is exactly the value it must not be"
    if obs.relation == "in":
        return f"`{obs.observed}` is expected in {subject if obs.call else f'`{obs.expected}`'}, " \
               "but it is missing"
    if obs.relation == "not in":
        return f"`{obs.observed}` shows up in {subject if obs.call else f'`{obs.expected}`'}, " \
               "where it must not"
    if obs.relation in ("<", "<=", ">", ">="):
        return f"`{obs.observed} {obs.relation} {obs.expected}` is expected to hold, but does not"
    if obs.relation == "true":
        return f"{subject} is `{obs.observed}` where a true result is expected"
    if obs.exception and obs.exception != "AssertionError":
        return f"it raises `{obs.exception}`" + (f": {obs.message}" if obs.message else "")
    return "a check of the result fails" + (f" ({obs.message})" if obs.message else "")


def _scenario(node: str) -> str:
    parts = node.split("::")[1:]
    name = re.sub(r"^test_?", "", parts[-1]).replace("_", " ").strip() or parts[-1]
    return name


class OfflineWriter:
    """The default writer: prose from the failure itself (see the module docstring)."""

    name = "offline"

    def write(self, evidence: BugEvidence) -> Statement:
        places = where_the_bug_is(evidence.bugs)
        modules = list(dict.fromkeys(m for m, _ in places))
        functions = [f"`{f}`" for _, f in places]
        observations = [(f, observe(f)) for f in evidence.failures]
        errors = sorted({o.exception for _, o in observations
                         if o.exception and o.exception != "AssertionError"})
        what = f"{errors[0]} raised" if errors and len(errors) == len(observations) else \
            "wrong results"
        where = " and ".join(functions) + f" in `{modules[0]}`" if len(modules) == 1 else \
            ", ".join(f"`{f}` in `{m}`" for m, f in places)
        title = f"{evidence.project}: {what} from {where}"
        count = len(evidence.failures)
        lines = [f"# {title}", "",
                 f"Since a recent change, code that goes through {where} misbehaves: "
                 f"{count} of the project's checks now {'fails' if count == 1 else 'fail'} while "
                 f"{evidence.passing} others still pass.", "",
                 "What happens, against what should happen:", ""]
        for failure, obs in observations:
            head = f"- {_scenario(failure.test).capitalize()} (`{failure.test.rsplit('::', 1)[-1]}`): "
            sentence = head + _sentence(obs) + "."
            if quotes_hidden_test(sentence, evidence.hidden_sources):
                sentence = head + _sentence(Observation(exception=obs.exception or "AssertionError")) + "."
            lines.append(sentence)
        calls = [o.call for _, o in observations if o.call]
        lines += ["", "To reproduce: " + (
            "call " + ", ".join(f"`{c}`" for c in dict.fromkeys(calls)) + " and compare with the "
            "expected values above." if calls else
            "exercise the behaviour named above (the project's test suite shows it once the "
            "failing checks are back)."),
            "", "The fix belongs in the library code; the remaining tests must keep passing."]
        report = "\n".join(lines) + "\n"
        return Statement(title, report, {"statement": {"writer": self.name}})


SYSTEM_PROMPT = (
    "You are a user of a Python library filing a GitHub issue. You are given a code change "
    "that introduced a bug (never mention or quote it) and the output of the tests that now "
    "fail. Write the issue as a user would: a one-line title on the first line (no prefix), "
    "then a blank line, then what you did, what you expected and what happened instead, with "
    "a short reproduction. Do not name or quote the tests, and do not give the fix.")


def build_prompt(evidence: BugEvidence) -> list[dict[str, str]]:
    """The chat messages :class:`OpenAIWriter` sends (the diff and the failing output)."""
    output = "\n\n".join(f"{f.test}: {f.exception or 'failed'}\n{(f.message or '').strip()}"
                         for f in evidence.failures)
    user = (f"Project: {evidence.project}\n\nThe change that introduced the bug:\n"
            f"```diff\n{evidence.patch}```\n\nThe failing output:\n```\n{output}\n```\n")
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


class OpenAIWriter:
    """An OpenAI-compatible endpoint writes the report; the model, the endpoint and the prompt
    are recorded in the statement's provenance."""

    name = "openai"

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str = "EMPTY",
                 timeout_s: float = 60.0, max_retries: int = 2, temperature: float = 0.0) -> None:
        self.model, self.base_url, self.api_key = model, base_url, api_key
        self.timeout_s, self.max_retries, self.temperature = timeout_s, max_retries, temperature

    def write(self, evidence: BugEvidence) -> Statement:
        from proofgym.chat_client import RetryPolicy, TransportError, openai_client, transport_error

        messages = build_prompt(evidence)
        client = openai_client(self.base_url, self.api_key, self.timeout_s, sync=True)

        def call() -> Any:
            try:
                return client.chat.completions.create(model=self.model, messages=messages,
                                                      temperature=self.temperature)
            except Exception as exc:  # the SDK's errors, turned into retryable or not
                error = transport_error(exc)
                if error is None:
                    raise
                raise error from exc

        try:
            response, _, _ = RetryPolicy(max_retries=self.max_retries).call(call)
        except (TransportError, RuntimeError) as exc:
            raise StatementError(f"the statement writer at {self.base_url} failed: {exc}") from exc
        text = (response.choices[0].message.content or "").strip()
        if not text:
            raise StatementError(f"{self.model} wrote an empty report")
        if quotes_hidden_test(text, evidence.hidden_sources):
            raise StatementError(f"{self.model}'s report quotes a hidden test")
        title, _, body = text.partition("\n")
        title = title.lstrip("# ").strip()
        report = f"# {title}\n\n{body.strip()}\n"
        prompt_sha = hashlib.sha256(repr(messages).encode()).hexdigest()
        return Statement(title, report, {"statement": {
            "writer": self.name, "model": self.model, "base_url": self.base_url,
            "system_prompt": SYSTEM_PROMPT, "prompt": messages, "prompt_sha256": prompt_sha}})


def only_names_and_exceptions(report: str, bugs: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a report says nothing beyond test names and exception types: it names no bug's
    function, and gives no value, message or call."""
    if any(f"`{f}`" in report for _, f in where_the_bug_is(bugs)):
        return False
    return not re.search(r"\w(Error|Exception|Exit|Interrupt)\b: \S|gives `|is expected|"
                         r"must not|is missing", report)
