"""Bug reports a person would write, from the bug's diff and the failing tests' output.

A :class:`StatementWriter` turns a :class:`BugEvidence` (the patch, where the bug is, each failing
test's exception and message) into a :class:`Statement`; the statement carries ``provenance``
(which writer, which model, which prompt), recorded in the task's record.

* :class:`OfflineWriter` (the default, :mod:`.offline`): the API the user called, what was
  expected and what was observed (the values a failed comparison saw, or the exception), and a
  call that triggers it, read from the failing tests run on the buggy source
  (:mod:`.evidence`).
* :class:`OpenAIWriter`: any OpenAI-compatible endpoint writes the report from the diff and the
  failing output (SWE-smith's recipe).

Neither quotes the hidden tests: a sentence holding a line of a hidden test file is left out
(:func:`quotes_hidden_test`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from proofgym.core.errors import StatementError as StatementError
from proofgym.tasks.synth.evidence import (
    BugEvidence,
    Failure,
    Observation,
    Statement,
    StatementWriter,
    names_a_hidden_test,
    observe,
    quotes_hidden_test,
    where_the_bug_is,
    without_hidden_names,
)
from proofgym.tasks.synth.offline import OfflineWriter

SYSTEM_PROMPT = (
    "You are a user of a Python library filing a GitHub issue. You are given a code change "
    "that introduced a bug (never mention or quote it) and the output of the tests that now "
    "fail. Write the issue as a user would: a one-line title on the first line (no prefix), "
    "then a blank line, then what you did, what you expected and what happened instead, with "
    "a short reproduction. Do not name or quote the tests, and do not give the fix.")


def build_prompt(evidence: BugEvidence) -> list[dict[str, str]]:
    """The chat messages :class:`OpenAIWriter` sends (the diff and the failing output)."""
    # no test id: the model is asked not to name the tests, and is given none to name
    output = without_hidden_names("\n\n".join(
        f"failing check {i}: {f.exception or 'failed'}\n{(f.message or '').strip()}"
        for i, f in enumerate(evidence.failures, 1)), evidence.failures)
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
        if names_a_hidden_test(text, evidence.failures):
            raise StatementError(f"{self.model}'s report names a hidden test")
        title, _, body = text.partition("\n")
        title = title.lstrip("# ").strip()
        report = f"# {title}\n\n{body.strip()}\n"
        prompt_sha = hashlib.sha256(repr(messages).encode()).hexdigest()
        return Statement(title, report, {"statement": {
            "writer": self.name, "model": self.model, "base_url": self.base_url,
            "system_prompt": SYSTEM_PROMPT, "prompt": messages, "prompt_sha256": prompt_sha}})


def only_names_and_exceptions(report: str, bugs: Sequence[Mapping[str, Any]] = ()) -> bool:
    """Whether a report says nothing beyond test names and exception types: no value, no
    exception message, no call that triggers it (``bugs``: kept for callers; naming the bug's
    function does not make a report say more)."""
    return not re.search(r"\w(Error|Exception|Exit|Interrupt|Iteration)\b`?: \S|`[^`\n]*\([^`\n]*\)`|"
                         r"(Expected|Observed): [^\n]*`|Calling `|gives `|is expected|must not|"
                         r"is missing", report)


def failures_of(failing: Mapping[str, Any]) -> list[Failure]:
    """The failures of a run's failing tests (``testrun.TestOutcome`` by test id), sorted, with
    how each reached the bug when the run watched for it."""
    out = []
    for test, outcome in sorted(failing.items()):
        if outcome is None:
            continue
        reached = getattr(outcome, "reached", None)
        out.append(Failure(test, outcome.exception, outcome.message,
                           tuple(reached.path) if reached else (),
                           tuple(reached.args) if reached else ()))
    return out


__all__ = ["SYSTEM_PROMPT", "BugEvidence", "Failure", "Observation", "OfflineWriter",
           "OpenAIWriter", "Statement", "StatementError", "StatementWriter", "build_prompt",
           "failures_of", "observe", "only_names_and_exceptions", "quotes_hidden_test",
           "where_the_bug_is"]
