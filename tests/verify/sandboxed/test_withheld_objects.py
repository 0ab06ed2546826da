"""A withheld identity check of an object that is no plain data.

A hidden ``assert r is not None`` (withheld: the host holds the ``None``) of a value that is an
object of the project's own (parse's ``Result``) is sent as ``{"unplain": ...}``; the host
failed every such check, so the reference fix of 8 of parse's 18 bundled tasks scored 0
(``test_mixed_types``: ``withheld check 1 (is not, line 20) does not hold``). An object that is
no plain data is none of ``None``, ``True`` and ``False`` (those are plain): ``is not`` one of
them holds and ``is`` one of them does not, whatever its methods, as in the test as written.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from proofgym.verify.sandboxed import swebench_verdict
from proofgym.verify.sandboxed.program import run_pytest
from tests.conftest import require_tool

pytestmark = pytest.mark.sandbox

_APP = """
class Result:
    def __init__(self, named):
        self.named = named

    def __eq__(self, other):
        return isinstance(other, Result) and other.named == self.named


def parse(text):
    if "=" not in text:
        return None
    key, value = text.split("=", 1)
    return Result({key: value})
"""
_HIDDEN = b"""
from app import parse


def test_parses_a_pair():
    r = parse("a=1")
    assert r is not None
    assert r.named == {"a": "1"}


def test_no_pair():
    assert parse("a") is None
"""
F2P = ["tests/test_hidden.py::test_parses_a_pair", "tests/test_hidden.py::test_no_pair"]


def _grade(tmp_path: Path, app: str):
    (tmp_path / "tests").mkdir(exist_ok=True)
    (tmp_path / "app.py").write_text(_APP.replace('"=" not in text', 'True'))  # the bug
    run = run_pytest(tmp_path, {"app.py": app.encode()}, tests=F2P,
                     hidden={"tests/test_hidden.py": _HIDDEN}, timeout_s=60, test_timeout_s=20)
    return run, swebench_verdict(run, F2P, [])


def test_an_object_is_not_none_where_the_check_is_withheld(tmp_path: Path):
    require_tool("bwrap")
    run, verdict = _grade(tmp_path, _APP)
    assert run.withheld, "the checks must be withheld for this to test anything"
    assert verdict.reward == 1.0, verdict.reason


def test_an_object_is_not_none_and_so_fails_an_is_none_check(tmp_path: Path):
    require_tool("bwrap")
    wrong = _APP.replace("    if \"=\" not in text:\n        return None\n", "")
    wrong = wrong.replace('key, value = text.split("=", 1)', 'key, _, value = text.partition("=")')
    run, verdict = _grade(tmp_path, wrong)  # parse("a") gives a Result: `is None` fails
    assert verdict.reward == 0.0 and run.failure is None, (run.failure, verdict.reason)
    assert run.results["tests/test_hidden.py::test_no_pair"] == "failed", run.results
    assert run.results["tests/test_hidden.py::test_parses_a_pair"] == "passed", run.results
