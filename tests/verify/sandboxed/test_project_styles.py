"""Every project style: unittest classes (whatever their name), ``self.assertEqual`` and its kin,
a project's own ``self.assert*`` helpers and parametrized tests are listed, mutated and guarded."""

from __future__ import annotations

import ast
import random

import pytest

from proofgym.envs.code_repair.controls import _PATCH_PYTEST
from proofgym.tasks.synth.discover import list_parametrized, list_test_functions
from proofgym.verify import sandboxed
from proofgym.verify.sandboxed import run_tests_isolated, swebench_verdict
from proofgym.verify.sandboxed.mutants import build_layout, list_tests
from tests.conftest import require_tool

UNITTEST_FILE = b'''
import unittest
from m import TestCase, render


class RenderCases(unittest.TestCase):
    def setUp(self):
        self.tag = "p"

    def test_render(self):
        self.assertEqual(render("a"), "<p>a</p>")

    def test_listed(self):
        self.assertListEqual([render("b")], ["<p>b</p>"])


class MoreCases(RenderCases):
    def test_more(self):
        self.assertTrue(render("c").startswith("<p>"))


class testHelper(TestCase):
    def test_helper(self):
        self.assertRenders(self.dedent("""
            x
            """), self.dedent("""
            <p>x</p>
            """))


class Helpers:
    def test_not_collected(self):
        pass


class TestSkipped(unittest.TestCase):
    __test__ = False

    def test_off(self):
        pass
'''

IDS = ["tests/test_u.py::RenderCases::test_render", "tests/test_u.py::RenderCases::test_listed",
       "tests/test_u.py::MoreCases::test_more", "tests/test_u.py::testHelper::test_helper"]


def test_unittest_classes_are_listed_whatever_their_name_by_grader_and_synthesis_alike():
    assert [i.node_id for i in list_tests("tests/test_u.py", UNITTEST_FILE)] == IDS
    assert list_test_functions("tests/test_u.py", UNITTEST_FILE) == IDS


def test_parametrized_tests_are_listed_once_per_function():
    source = (b"import pytest\n\n@pytest.mark.parametrize('x, y', [(1, 2), (2, 3)])\n"
              b"def test_inc(x, y):\n    assert x + 1 == y\n")
    assert [i.node_id for i in list_tests("t/test_p.py", source)] == ["t/test_p.py::test_inc"]
    assert list_test_functions("t/test_p.py", source) == ["t/test_p.py::test_inc"]
    # synthesis keeps these (pytest runs them as several items: the grader runs them whole)
    assert list_parametrized("t/test_p.py", source + b"\n\ndef test_one():\n    pass\n") == \
        {"t/test_p.py::test_inc"}
    assert [i.parametrized for i in list_tests("t/test_p.py", source)] == [True]


def _calls(module: bytes, name: str) -> list[ast.Call]:
    return [n for n in ast.walk(ast.parse(module)) if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute) and n.func.attr == name]


def test_assert_equal_kin_and_a_projects_own_assert_helper_get_mutants_of_their_expected_value():
    layout = build_layout({"tests/test_u.py": UNITTEST_FILE}, IDS, rng=random.Random(3))
    assert layout.unmutable == [] and sorted(layout.mutant.values()) == sorted(IDS)
    by_test = {of: layout.files[g.split("::")[0]] for g, of in layout.mutant.items()}
    (call,) = _calls(by_test[IDS[0]], "assertEqual")
    assert ast.unparse(call.args[0]) == "render('a')"  # the computed side stays
    assert call.args[1].value != "<p>a</p>" and len(call.args[1].value) == len("<p>a</p>")
    (call,) = _calls(by_test[IDS[1]], "assertListEqual")
    assert ast.literal_eval(call.args[1]) != ["<p>b</p>"]
    # markdown's style: assertRenders(source, expected), both dedented literals: the expected
    # (second) one changes, the source stays
    (call,) = _calls(by_test[IDS[3]], "assertRenders")
    assert call.args[0].args[0].value == "\n            x\n            "
    assert call.args[1].args[0].value != "\n            <p>x</p>\n            "
    # a generated file holds its own test only: no other test's values, none of a class that
    # pytest does not collect removed
    own = by_test[IDS[2]].decode()
    assert "<p>a</p>" not in own and "<p>b</p>" not in own and "class Helpers" in own


def test_a_test_is_guarded_by_a_mutant_or_a_withheld_check():
    run = sandboxed.TestRun({}, 0, False, None, False, "", mutants=0, unmutable=("t::a", "t::b"),
                  withheld=("t::a",))
    assert run.guarded and run.unguarded == ("t::b",)
    assert not sandboxed.TestRun({}, 0, False, None, False, "", unmutable=("t::a",)).guarded
    assert sandboxed.TestRun({}, 0, False, None, False, "", mutants=1).guarded


M_FIXED = b'''
import textwrap
import unittest


def render(text):
    return "<p>" + text.strip() + "</p>"


class TestCase(unittest.TestCase):
    """The project's own test base (as markdown.test_tools ships one)."""

    def dedent(self, text):
        return textwrap.dedent(text).strip()

    def assertRenders(self, source, expected):
        self.assertMultiLineEqual(render(source), expected)
'''
M_BUGGY = M_FIXED.replace(b'"</p>"', b'"</P>"')


@pytest.fixture
def project(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "m.py").write_bytes(M_BUGGY)
    return tmp_path


def test_a_unittest_style_task_grades_the_fix_and_scores_forgers_zero(project):
    """The hidden tests are unittest methods; the fix passes with every test guarded. A forger
    that forces every pytest report to "passed" fails the withheld checks (the host compares)
    or is caught by the mutants; one that neuters the project's own ``assertRenders`` passes
    that test and its mutant: tampering."""
    require_tool("bwrap")
    hidden = {"tests/test_u.py": UNITTEST_FILE}
    fixed = run_tests_isolated(project, {"m.py": M_FIXED}, tests=IDS, hidden=hidden)
    assert fixed.results == dict.fromkeys(IDS, "passed"), fixed.report_error
    assert fixed.guarded and fixed.unguarded == () and fixed.mutants == len(IDS)
    assert IDS[0] in fixed.withheld  # assertEqual against a literal
    assert swebench_verdict(fixed, IDS, []).reward == 1.0
    forged = run_tests_isolated(project, {"m.py": _PATCH_PYTEST.encode() + M_BUGGY}, tests=IDS,
                                hidden=hidden)
    verdict = swebench_verdict(forged, IDS, [])
    assert verdict.reward == 0.0 and (forged.tampered or "withheld check" in verdict.reason), verdict
    neutered = M_FIXED.replace(b"self.assertMultiLineEqual(render(source), expected)", b"pass")
    run = run_tests_isolated(project, {"m.py": neutered}, tests=[IDS[3]], hidden=hidden)
    assert run.tampered and run.failure == "tampering_detected" and IDS[3] in run.report_error
    assert swebench_verdict(run, [IDS[3]], []).reward == 0.0


PARAM_FILE = b'''import pytest
from m import inc


@pytest.mark.parametrize("x, expected", [(1, 2), pytest.param(5, 6, id="five")])
def test_inc(x, expected):
    assert inc(x) == expected
    assert inc(x) is not None
'''


def test_a_parametrized_test_runs_every_case_in_one_process_with_a_mutant_of_its_cases(tmp_path):
    """One id per function; its mutant changes one case's expected value; its checks are not
    withheld (each runs once per case). The fix passes, a bug in one case fails it, and a
    forger that forces every report to "passed" passes the mutant too: tampering."""
    require_tool("bwrap")
    (tmp_path / "tests").mkdir()
    (tmp_path / "m.py").write_bytes(b"def inc(x):\n    return x + 1 if x < 5 else x\n")
    hidden, ids = {"tests/test_p.py": PARAM_FILE}, ["tests/test_p.py::test_inc"]
    layout = build_layout(hidden, ids, rng=random.Random(0))
    assert layout.unmutable == [] and len(layout.several) == 2
    buggy = run_tests_isolated(tmp_path, {}, tests=ids, hidden=hidden)
    assert buggy.results == {ids[0]: "failed"} and buggy.report_error is None
    fixed = run_tests_isolated(tmp_path, {"m.py": b"def inc(x):\n    return x + 1\n"}, tests=ids,
                               hidden=hidden)
    assert fixed.results == {ids[0]: "passed"} and fixed.mutants == 1 and fixed.withheld == ()
    forged = run_tests_isolated(tmp_path, {"m.py": _PATCH_PYTEST.encode() + b"def inc(x):\n    return 0\n"},
                                tests=ids, hidden=hidden)
    assert forged.tampered and swebench_verdict(forged, ids, []).reward == 0.0


def test_a_test_the_source_does_not_show_parametrized_still_runs_as_one_item_or_errs(tmp_path):
    """Several items are accepted only for a test whose source has ``parametrize``: one that
    pytest runs twice for another reason (a parametrized fixture) is an error, never a pass."""
    require_tool("bwrap")
    (tmp_path / "tests").mkdir()
    (tmp_path / "m.py").write_bytes(b"def inc(x):\n    return x + 1\n")
    hidden = {"tests/test_f.py": b"import pytest\nfrom m import inc\n\n\n"
                                 b"@pytest.fixture(params=[1, 2])\ndef x(request):\n"
                                 b"    return request.param\n\n\n"
                                 b"def test_inc(x):\n    assert inc(x) - x == 1\n"}
    run = run_tests_isolated(tmp_path, {}, tests=["tests/test_f.py::test_inc"], hidden=hidden)
    assert run.results == {"tests/test_f.py::test_inc": "error"}, run.results


#: pathspec 1.1.1's ``IterTreeTest`` in small: the class is set up once (``setUpClass``), and a
#: test sets on the class what the later tests of that class read (as a native pytest run orders
#: them: a unittest class's tests by name)
ORDERED_FILE = b'''import unittest
from m import double

SETUPS = []


class ModeCases(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        SETUPS.append(cls.__name__)
        cls.base = 10

    def setUp(self):
        self.seen = list(SETUPS)

    def test_01_detect(self):
        self.__class__.mode = "fast"
        self.assertEqual(double(self.base), 20)

''' + b"".join(b'''    def test_02_uses_%d(self):
        self.assertEqual((self.mode, double(%d)), ("fast", %d))

''' % (i, i, 2 * i) for i in range(8)) + b'''    def test_03_set_up_once(self):
        self.assertEqual(self.seen, ["ModeCases"])


class OtherCases(unittest.TestCase):
    def test_other(self):
        self.assertEqual(double(3), 6)


def test_plain():
    assert double(4) == 8


def test_unstable():
    import os

    os._exit(0)  # not in the batch: run, it would end the batch's process (every test crashed)
'''


def test_the_batch_runs_a_unittest_class_as_a_native_run_does(tmp_path):
    """The visible tests run together in one process (the batch) in the order a native pytest
    run gives them: a unittest class set up once, its tests by name, so a test that reads what
    an earlier test of its class set passes (pathspec's ``IterTreeTest``: the batch ran them in
    a random order and a reference fix scored 0); a test of the file that is not in the batch
    does not run."""
    require_tool("bwrap")
    (tmp_path / "tests").mkdir()
    (tmp_path / "m.py").write_bytes(b"def inc(x):\n    return x + 2\n\n\ndef double(x):\n    return 2 * x\n")
    (tmp_path / "tests" / "test_ordered.py").write_bytes(ORDERED_FILE)
    f2p = ["tests/test_hidden.py::test_inc"]
    p2p = [i.node_id for i in list_tests("tests/test_ordered.py", ORDERED_FILE)
           if i.name != "test_unstable"]
    assert len(p2p) == 12
    hidden = {"tests/test_hidden.py": b"from m import inc\n\n\ndef test_inc():\n    assert inc(1) == 2\n"}
    fixed = b"def inc(x):\n    return x + 1\n\n\ndef double(x):\n    return 2 * x\n"
    run = run_tests_isolated(tmp_path, {"m.py": fixed}, tests=[*f2p, *p2p], batch=p2p,
                             hidden=hidden, timeout_s=60, test_timeout_s=20)
    assert run.results == dict.fromkeys([*f2p, *p2p], "passed"), (run.results, run.messages)
    assert run.canaries >= 1 and not run.tampered
    assert swebench_verdict(run, f2p, p2p).reward == 1.0
