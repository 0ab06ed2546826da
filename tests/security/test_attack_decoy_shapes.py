"""Attack: tell the decoys from the hidden tests by the visible tests' shapes, and pass no fix.

A decoy is a mutant of a visible (pass-to-pass) test run in a process of its own among the
hidden tests'; a run counted as guarded with decoys alone, where no hidden test had a mutant or
a withheld check. But the visible tests are in the workspace: code under test that compares its
test function with theirs (constants and names aside) knows a decoy, leaves it honest and
passes every other test process, the hidden ones. With no fix at all, that knowing nothing of
the task, it scored 1.0 on a task shaped as below (3 of 3 gradings) and on the bundled
six-ad373c66cf (all 2 fail-to-pass and 67 pass-to-pass tests passed), one of the bundled tasks
whose hidden tests have no mutant and no withheld check (18 of the 220 of the 10 projects checked).

Defence: decoys do not make a run guarded; a task whose hidden tests are not guarded is a
grader error (``CodeRepairTask.verify``, ``RepoRepairTask.verify``), and synthesis rejects it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from proofgym.verify.sandboxed import swebench_verdict
from proofgym.verify.sandboxed.program import run_pytest
from tests.conftest import require_tool

pytestmark = pytest.mark.sandbox

#: a hidden test no mutant can be built for: nothing to change, nothing to withhold
_HIDDEN = b"""
from app import add


def test_add_does_not_raise():
    add(2, 3)
"""
_VISIBLE = """
from app import mul


def test_mul_small():
    assert mul(2, 3) == 6


def test_mul_zero():
    assert mul(7, 0) == 0


def test_mul_negative():
    assert mul(-2, 4) == -8
"""
F2P = ["tests/test_hidden.py::test_add_does_not_raise"]
P2P = [f"tests/test_visible.py::test_mul_{n}" for n in ("small", "zero", "negative")]
_BUGGY = "def add(a, b):\n    raise ValueError('bug')\n\n\ndef mul(a, b):\n    return a * b\n"
#: knows nothing of the task: a test shaped as a visible one is a decoy; pass every other
_FORGER = """
import ast, inspect, os
import _pytest.reports as _reports

_made = _reports.TestReport.from_item_and_call.__func__


def _shape(fn):
    tree = ast.parse(fn)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant):
            node.value = 0
        if isinstance(node, ast.FunctionDef):
            node.name = "f"
    return ast.dump(tree)


def _forged(cls, item, call):
    report = _made(cls, item, call)
    try:
        mine = _shape(inspect.getsource(item.function))
        own_file = os.path.abspath(str(item.fspath))
        shapes = set()
        for root, _, names in os.walk("/workspace"):
            for name in names:
                path = os.path.join(root, name)
                if name.startswith("test") and name.endswith(".py") and path != own_file:
                    try:
                        tree = ast.parse(open(path).read())
                    except (OSError, SyntaxError):
                        continue
                    shapes |= {_shape(ast.unparse(n)) for n in tree.body if isinstance(n, ast.FunctionDef)}
        decoy = mine in shapes
    except Exception:
        decoy = True
    if len(item.session.items) == 1 and not decoy:
        report.outcome, report.longrepr = "passed", None
    return report


_reports.TestReport.from_item_and_call = classmethod(_forged)
""" + _BUGGY


def test_a_run_guarded_by_decoys_alone_is_not_guarded(tmp_path: Path):
    require_tool("bwrap")
    (tmp_path / "app.py").write_text(_BUGGY)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_visible.py").write_text(_VISIBLE)
    run = run_pytest(tmp_path, {"app.py": _FORGER.encode()}, tests=[*F2P, *P2P], batch=P2P,
                     hidden={"tests/test_hidden.py": _HIDDEN}, timeout_s=60, test_timeout_s=20)
    # what the forger buys where decoys counted as a guard: the unfixed bug passes
    assert run.results[F2P[0]] == "passed" and run.failure is None, (run.results, run.failure)
    assert swebench_verdict(run, F2P, P2P).reward == 1.0
    assert run.decoys >= 1 and run.mutants == 0 and not run.withheld
    assert not run.guarded  # so the task is a grader error, never a reward
