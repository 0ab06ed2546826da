"""Bug reports: the offline writer's observed-versus-expected prose from real pytest failures, the
OpenAI-compatible writer against the real scripted server, both recorded in the task's record."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from proofgym.core import TurnCompleteAction
from proofgym.tasks.synth import ProjectSynth
from proofgym.tasks.synth.statements import (
    SYSTEM_PROMPT,
    BugEvidence,
    Failure,
    OfflineWriter,
    OpenAIWriter,
    StatementError,
    observe,
    only_names_and_exceptions,
    quotes_hidden_test,
)
from proofgym.tasks.synth.tells import names_a_removed_name
from proofgym.testing.server import ScriptedServer
from tests.conftest import require_tool
from tests.tasks.synth_helpers import TESTS, demo_pin

HIDDEN = b'''\
from calc import add, pick


def test_add_small_numbers():
    assert add(1, 2) == 3


def test_pick_keeps_the_member():
    assert "x" in pick(["x", "y"], "x")


def test_add_rejects_text():
    add("a", 1)
'''
CALC = b'''\
def add(a, b):
    if isinstance(a, str):
        return {}["number expected"]
    return a - b


def pick(items, keep):
    return [i for i in items if i != keep]
'''


def _real_failures(tmp_path) -> list[Failure]:
    """Run the hidden tests for real and keep what the screening run keeps of each failure
    (the exception type and ``str()`` of the exception)."""
    (tmp_path / "calc.py").write_bytes(CALC)
    (tmp_path / "test_calc.py").write_bytes(HIDDEN)
    (tmp_path / "conftest.py").write_text(
        "import json\n"
        "def pytest_runtest_makereport(item, call):\n"
        "    if call.when == 'call' and call.excinfo is not None:\n"
        "        with open('failures.jsonl', 'a') as f:\n"
        "            f.write(json.dumps([item.nodeid, call.excinfo.typename, "
        "str(call.excinfo.value)]) + '\\n')\n")
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_calc.py"],
                   cwd=tmp_path, capture_output=True, check=False)
    import json

    rows = [json.loads(line) for line in (tmp_path / "failures.jsonl").read_text().splitlines()]
    return [Failure(*row) for row in rows]


def _evidence(tmp_path) -> BugEvidence:
    return BugEvidence("calc", "--- a/calc.py\n+++ b/calc.py\n", [{"file": "calc.py", "function": "add"}],
                       _real_failures(tmp_path), 4, [HIDDEN])


def test_the_offline_report_says_what_was_expected_and_what_was_observed(tmp_path):
    evidence = _evidence(tmp_path)
    assert len(evidence.failures) == 3
    statement = OfflineWriter().write(evidence)
    report = statement.report
    # assert add(1, 2) == 3 failed with -1: expected, observed, and how to trigger it
    assert "Calling `add(1, 2)` does not behave as it should.\n\n- Expected: `3`\n- Observed: `-1`" \
        in report, report
    assert "```python\n>>> add(1, 2)\n-1\n```" in report, report
    assert "- Expected: `'x'` to be in the result\n- Observed: it is missing: the result is `['y']`" \
        in report, report
    assert "- Observed: `KeyError`: 'number expected'" in report, report
    # the title names the function the bug is in (no call path traced here), never another one
    assert statement.title == "calc: `add` returns `-1` instead of `3`"
    assert "pick" not in statement.title
    assert not quotes_hidden_test(report, [HIDDEN])
    assert not any(name in report for name in ("test_add", "test_pick", "small_numbers"))
    assert not only_names_and_exceptions(report)
    made = statement.provenance["statement"]
    assert made["writer"] == "offline" and ["`-1`", "`3`"] in made["compared"]


def test_the_title_names_the_public_api_the_user_called_on_the_path_to_the_bug():
    bugs = [{"file": "src/shop/cart.py", "function": "_sum"}]
    traced = Failure("tests/test_cart.py::test_total", "AssertionError",
                     "assert 7 == 9\n +  where 7 = total()\n +    where total = "
                     "<shop.cart.Cart object at 0x7f00>.total",
                     path=("Cart.total", "Cart._sum"), args=())
    setter = Failure("tests/test_cart.py::test_rename", "TypeError", "name must be str",
                     path=("Cart.__setattr__", "Cart._sum"), args=("'owner'", "'ann'"))
    statement = OfflineWriter().write(BugEvidence("shop", "", bugs, [traced, setter], 3))
    assert statement.title == "shop: `Cart.total` returns `7` instead of `9`", statement.title
    report = statement.report
    assert ">>> o = ...  # a Cart\n>>> o.total()\n7" in report, report
    assert "Calling `o.owner = 'ann'` (where `o` is a `Cart`)" in report, report
    assert "0x7f00" not in report and "test_" not in report
    # a private entry (a test calling a helper) is not named: the bug's own function is
    helper = Failure("t.py::test_x", "ValueError", "bad", path=("_helper", "Cart._sum"))
    assert OfflineWriter().write(BugEvidence("shop", "", bugs, [helper], 1)).title == \
        "shop: `Cart._sum` raises `ValueError`: bad"


def test_a_bug_outside_any_function_is_named_by_its_module():
    # a release's fix of a module-level table (humanize 4.17.0's i18n.py): the bug's function is
    # "", which gave titles like "humanize: `` gives `'10,000,000'` instead of ..."
    bugs = [{"file": "src/humanize/i18n.py", "function": "", "line": 29}]
    failure = Failure("tests/test_i18n.py::test_intcomma", "AssertionError",
                      "assert '10,000,000' == '10.000.000'")
    statement = OfflineWriter().write(BugEvidence("humanize", "", bugs, [failure], 5))
    assert "``" not in statement.title and "``" not in statement.report, statement.report
    assert statement.title.startswith("humanize: `humanize.i18n` gives"), statement.title
    assert statement.provenance["statement"]["apis"] == ["humanize.i18n"]


def test_observations_of_pytest_and_unittest_failures():
    swapped = observe(Failure("t::a", "AssertionError", "assert 3 == 4\n +  where 4 = f(1)"))
    assert (swapped.observed, swapped.expected, swapped.call) == ("4", "3", "f(1)")
    unit = observe(Failure("t::b", "AssertionError", "'ab' != 'ba'\n- ab\n+ ba"))
    assert (unit.observed, unit.expected, unit.relation) == ("'ab'", "'ba'", "==")
    local = observe(Failure("t::c", "AssertionError",
                            "assert not {1: <function test_c.<locals>.cb at 0x7f11>}"))
    assert (local.observed, local.relation) == ("{1: <function cb>}", "false")
    raised = observe(Failure("t::d", "Failed", "DID NOT RAISE <class 'ValueError'>"))
    assert (raised.relation, raised.exception) == ("raises", "ValueError")
    # pytest shortened both sides alike: the differing item says what differs
    alike = observe(Failure("t::e", "AssertionError", "assert {'a': {'...b': None}}} == "
                            "{'a': {'...b': None}}}\n  \n  Differing items:\n  {'a': 1} != {'a': [1]}"))
    assert (alike.observed, alike.expected) == ("{'a': 1}", "{'a': [1]}")
    regex = observe(Failure("t::f", "AssertionError", "Regex pattern did not match.\n"
                            "  Expected regex: 'bad version'\n  Actual message: 'ok'"))
    assert (regex.observed, regex.expected, regex.relation) == ("'ok'", "'bad version'", "matches")
    unraised = observe(Failure("t::h", "AssertionError", "KeyError not raised"))
    assert (unraised.relation, unraised.exception) == ("raises", "KeyError")
    named = observe(Failure("t::g", "TypeError", "test_g.<locals>.<lambda>() takes 1 argument"))
    assert named.message == "<lambda>() takes 1 argument"


def test_a_line_of_data_in_a_hidden_test_is_no_quote_a_line_of_code_is():
    hidden = [b"def test_x():\n    data = {\n        'config': {\n    }}\n    assert parse(data) == 1\n"]
    assert not quotes_hidden_test("- Observed: `{'config': {'a': 1}}`", hidden)
    assert quotes_hidden_test("see assert parse(data) == 1", hidden)


def test_a_sentence_that_would_quote_a_hidden_test_line_is_left_out():
    hidden = b"def test_x():\n    check_lookup_table_for(7)\n"
    failure = Failure("t.py::test_x", "ValueError", "check_lookup_table_for(7)")
    report = OfflineWriter().write(BugEvidence("p", "", [{"file": "p/m.py", "function": "f"}],
                                               [failure], 1, [hidden])).report
    assert "- Observed: `ValueError`\n" in report, report
    assert not quotes_hidden_test(report, [hidden]) and "check_lookup_table_for" not in report


def test_a_template_report_is_recognised():
    template = ("# munch: getitem dunder is broken\n\n- `test_getitem_dunder`: getitem dunder; "
                "fails with AssertionError\n")
    bugs = [{"file": "munch/__init__.py", "function": "get"}]
    assert only_names_and_exceptions(template, bugs)
    assert not only_names_and_exceptions(template.replace("AssertionError", "KeyError: 'x'"), bugs)


def test_a_name_error_of_a_removed_name_is_recognised():
    patch = "--- a/f.py\n+++ b/f.py\n@@ -1,2 +1,1 @@\n-    seen = set()\n     for x in items:\n"
    assert names_a_removed_name(patch, [Failure("t::a", "NameError", "name 'seen' is not defined")])
    assert names_a_removed_name(patch, [Failure("t::a", "UnboundLocalError",
                                                "cannot access local variable 'seen' where it is not "
                                                "associated with a value")])
    assert not names_a_removed_name(patch, [Failure("t::a", "NameError", "name 'other' is not defined")])
    assert not names_a_removed_name(patch, [Failure("t::a", "AssertionError", "assert 'seen' == 1")])


class IssueAuthor:
    """A writer model: answers every request with an issue, after checking the request holds
    the diff and the failing output (what SWE-smith's recipe gives the model)."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def respond(self, messages: Sequence[Mapping[str, Any]], tools: Any) -> list[Any]:
        user = str(messages[-1]["content"])
        self.prompts.append(user)
        assert messages[0]["content"] == SYSTEM_PROMPT
        assert "```diff\n--- a/pgdemo/__init__.py" in user and "The failing output" in user
        return [TurnCompleteAction("Clamping gives values outside the bounds\n\n"
                                   "I called the clamp helper with a value below the lower bound "
                                   "and expected the bound back; I got something else.")]


@pytest.mark.slow
def test_acceptance_4_a_writer_behind_the_scripted_server_writes_a_synthesised_tasks_report(
        tmp_path, monkeypatch):
    require_tool("bwrap")
    monkeypatch.setenv("PROOFGYM_CACHE", str(tmp_path / "cache"))
    pin = demo_pin(tmp_path / "index", tier2=0)
    author = IssueAuthor()
    with ScriptedServer(author, model="issue-writer") as server:
        writer = OpenAIWriter("issue-writer", base_url=server.base_url, timeout_s=10)
        records = ProjectSynth(pin, quiet=True, writer=writer).run(max_tasks=1).records
    assert len(records) == 1 and author.prompts
    record = records[0]
    assert record.title == "Clamping gives values outside the bounds"
    assert record.bug_report.startswith("# Clamping gives values outside the bounds\n\nI called")
    made = record.provenance["statement"]
    assert made["writer"] == "openai" and made["model"] == "issue-writer"
    assert made["base_url"] == server.base_url and made["prompt"][1]["content"] == author.prompts[-1]
    assert record.to_dict()["provenance"] == record.provenance  # written to the manifest
    # the offline default on the same project: observed versus expected, from the failure
    offline = ProjectSynth(pin, quiet=True).run(max_tasks=3).records
    compared = [r for r in offline if "- Expected: `" in r.bug_report]
    assert compared, [r.bug_report for r in offline]
    for r in offline:
        assert r.provenance["statement"]["writer"] == "offline"
        assert r.provenance["statement"]["call_path"]  # traced on the buggy source
        assert not quotes_hidden_test(r.bug_report, [TESTS.encode()])
        assert not only_names_and_exceptions(r.bug_report, r.bugs)


def test_a_writer_that_quotes_a_hidden_test_is_refused():
    class Quoter:
        def respond(self, messages: Any, tools: Any) -> list[Any]:
            return [TurnCompleteAction("Broken\n\nassert lookup_table_value(7) == 9 fails")]

    hidden = b"def test_x():\n    assert lookup_table_value(7) == 9\n"
    evidence = BugEvidence("p", "", [{"file": "p/m.py", "function": "f"}], [], 1, [hidden])
    with ScriptedServer(Quoter()) as server, pytest.raises(StatementError, match="quotes a hidden"):
        OpenAIWriter("scripted", base_url=server.base_url, timeout_s=10).write(evidence)
