"""Attack: read the hidden tests' names out of the bug report.

The report is the one text the agent reads about the hidden tests; it must say what a user
would (the call, what was expected, what was observed), never what only the tests know. Names
of the hidden tests reach it through the failure's own text: an exception message or a value's
repr naming a test (``test_rcurry.<locals>.<lambda>() missing 1 required positional argument``,
``'TestLookupTable' object has no attribute ...``), and through a writer model given the test
ids. The bundled manifest held 13 written reports naming a hidden test (boltons, funcy, h11,
munch, six, toolz), written before the offline writer dropped such names; a hidden unittest
class's name still got through the offline writer, and nothing stopped a writer model from
repeating the test ids its prompt gave it.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from proofgym.core import TurnCompleteAction
from proofgym.envs.repo_repair import MANIFEST
from proofgym.tasks.synth import read_manifest
from proofgym.tasks.synth.statements import (
    BugEvidence,
    Failure,
    OfflineWriter,
    OpenAIWriter,
    StatementError,
    build_prompt,
)
from proofgym.testing.server import ScriptedServer

_HIDDEN = b"""\
import unittest

from calc import add


class TestLookupTable(unittest.TestCase):
    def test_add_many(self):
        self.assertEqual(add(1, 2), 3)
"""
_FAILURES = [
    Failure("tests/test_calc.py::TestLookupTable::test_add_many", "AttributeError",
            "'TestLookupTable' object has no attribute 'helper'", ("calc.add",), ("1", "2")),
    Failure("tests/test_calc.py::test_add_callback", "TypeError",
            "test_add_callback.<locals>.<lambda>() missing 1 required positional argument: 'z'",
            ("calc.add",), ("3",)),
]
_EVIDENCE = BugEvidence("calc", "--- a/calc.py\n+++ b/calc.py\n",
                        [{"file": "calc.py", "function": "add", "line": 1}], _FAILURES, 4, [_HIDDEN])


def _names(test_ids: list[str] | tuple[str, ...]) -> set[str]:
    """The names a hidden test id holds (its class and function, not its file)."""
    return {part.split("[", 1)[0] for test in test_ids for part in test.split("::")[1:]}


def _named(text: str, names: set[str]) -> list[str]:
    return sorted(n for n in names if re.search(rf"(?<!\w){re.escape(n)}(?!\w)", text))


def test_no_bundled_report_names_a_hidden_test():
    leaks = {}
    for record in read_manifest(MANIFEST):
        if record.provenance.get("statement", {}).get("writer") == "changelog":
            continue  # the project's own words
        named = _named(f"{record.title}\n{record.bug_report}", _names(record.fail_to_pass))
        if named:
            leaks[record.id] = named
    assert not leaks, leaks


def test_the_offline_writer_names_no_hidden_test_class_or_function():
    statement = OfflineWriter().write(_EVIDENCE)
    text = f"{statement.title}\n{statement.report}"
    assert not _named(text, _names([f.test for f in _FAILURES])), text
    assert "no attribute 'helper'" in text  # what was observed is still said


def test_a_writer_model_is_given_no_hidden_test_id_and_a_report_naming_one_is_refused():
    user = build_prompt(_EVIDENCE)[1]["content"]
    assert not _named(user, _names([f.test for f in _FAILURES])), user
    assert "missing 1 required positional argument" in user  # the failing output is there

    class Namer:
        def respond(self, messages: Any, tools: Any) -> list[Any]:
            return [TurnCompleteAction("add is broken\n\nTestLookupTable fails since the change")]

    with ScriptedServer(Namer()) as server, pytest.raises(StatementError, match="names a hidden test"):
        OpenAIWriter("scripted", base_url=server.base_url, timeout_s=10).write(_EVIDENCE)


_EXPECTED_FIRST = b"""\
import unittest

import inflection


def test_camelize_with_lower_downcases_the_first_letter():
    assert 'capital' == inflection.camelize('Capital', False)


class TestPlural(unittest.TestCase):
    def test_empty(self):
        self.assertEqual("", inflection.pluralize(""))
"""


@pytest.mark.parametrize("test, message, expected, observed", [
    # pytest's own text of `assert 'capital' == inflection.camelize(...)`: no `where` line
    ("test_inflection.py::test_camelize_with_lower_downcases_the_first_letter",
     "assert 'capital' == 'papital'\n  \n  - papital\n  ? ^\n  + capital\n  ? ^", "'capital'", "'papital'"),
    ("test_inflection.py::TestPlural::test_empty", "'' != 's'", "''", "'s'"),
])
def test_a_report_does_not_swap_what_was_expected_and_what_was_observed(test, message, expected, observed):
    """An assert that puts the expected value first (inflection's style, and unittest's
    ``assertEqual(expected, actual)``) showed the buggy value as the expected one: 5 of
    inflection's 9 bundled reports had the two swapped (``camelize('Capital', False)`` was to
    give ``'papital'``). The hidden test's own assert says which side is its literal."""
    failure = Failure(test, "AssertionError", message, ("inflection.camelize",), ("'Capital'", "False"))
    evidence = BugEvidence("inflection", "", [{"file": "inflection/__init__.py", "function": "camelize",
                                               "line": 1}], [failure], 4, [_EXPECTED_FIRST])
    report = OfflineWriter().write(evidence).report
    assert f"- Expected: `{expected}`" in report and f"- Observed: `{observed}`" in report, report
