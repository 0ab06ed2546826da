"""Attack: tell each hidden test from its mutant, and pass the real one only.

Tamper detection (:mod:`proofgym.verify.sandboxed.mutants`) rests on the code under test being unable to
tell a real test from its mutant. But a grading writes every real test *and* its mutant into the
same ``/workspace`` before the first test runs, and the code under test can read them all. The
agent's function, called from a test, reads the caller's assertion (``== 5``), finds the file with
the same call and another expected value (its mutant, or the real test if it is one), and returns
the *smaller* of the two: for a test whose real value is 0 the mutant was always larger (a
mutant of a small int was always ``value + delta``), so it picked the real test every time; for
larger values half the time. Exactly one of each pair passed, so no tampering was flagged, and
the real tests passed far more often than the 1 in 2**k of a coin flip per test (34% of layouts
of a 4-test task), without computing anything.

The fix: a test process sees only its own generated file (the runner writes test N's file for
test N's process alone, and that process zeroes the job's bytes it inherited), and a mutated
value is drawn from the values of the same kind the task's tests hold (here 0, 1, 4, 8), with the
real one's sign, digit count and relation to the test's inputs. What a forger can still do is
guess, per test, from that test's value alone: right half the time per pair, 2**-k for k hidden
tests (``tests/security/test_attack_mutant_classifier.py`` runs the red team's classifier over
every bundled task).
"""

from __future__ import annotations

import ast
import random
import re
from pathlib import Path

import pytest

from proofgym.verify.sandboxed import run_tests_isolated, swebench_verdict
from proofgym.verify.sandboxed.mutants import build_layout, mutate_test
from tests.conftest import require_tool

_HIDDEN = (b"from primes import count_below\n\n\n"
           b"def test_two():\n    assert count_below(2) == 0\n\n\n"
           b"def test_three():\n    assert count_below(3) == 1\n\n\n"
           b"def test_ten():\n    assert count_below(10) == 4\n\n\n"
           b"def test_twenty():\n    assert count_below(20) == 8\n")
_IDS = [f"tests/test_p.py::test_{n}" for n in ("two", "three", "ten", "twenty")]

#: The agent's "solution": no primes are counted; it reads the tests instead.
_FORGER = b'''
import ast, os, sys


def _expected(path):
    for node in ast.walk(ast.parse(open(path).read())):
        if isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare):
            left, right = node.test.left, node.test.comparators[0]
            if isinstance(left, ast.Call) and getattr(left.func, "id", "") == "count_below" \\
                    and isinstance(right, ast.Constant):
                return ast.dump(left), right.value
    return None


def count_below(n):
    caller = sys._getframe(1).f_code.co_filename
    call, value = _expected(caller)
    values = [value]
    folder = os.path.dirname(caller)
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        if name.endswith(".py") and path != caller:
            try:
                other = _expected(path)
            except (OSError, SyntaxError):
                continue
            if other is not None and other[0] == call:
                values.append(other[1])
    return min(values)
'''

def _forger_wins(layout, guess) -> bool:
    """Whether a forger that sees one generated test at a time (what a test process sees now)
    resolves a grading laid out as ``layout``: it passes a test when ``guess(value)`` says the
    test's expected value is the real one, and fails it otherwise (no sandbox needed: it
    decides from each generated file alone)."""
    found = {}
    for gen in layout.run:
        for node in ast.walk(ast.parse(layout.files[gen.split("::")[0]])):
            if isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare):
                found[gen] = (ast.literal_eval(node.test.comparators[0]), type(node.test.ops[0]))

    def passes(gen: str) -> bool:
        value, op = found[gen]
        return guess(value) == (op is ast.Eq)

    real_of = {v: k for k, v in layout.real.items()}
    tampered = any(passes(g) and passes(real_of[of]) for g, of in layout.mutant.items())
    return all(passes(g) for g in layout.real) and not tampered


#: Guesses from one value alone: "mutants are larger" (the old bias), "smaller", parity, sign.
_GUESSES = {**{f"below {t}": (lambda v, t=t: v < t) for t in range(-4, 14)},
            **{f"above {t}": (lambda v, t=t: v > t) for t in range(-4, 14)},
            "even": lambda v: v % 2 == 0, "odd": lambda v: v % 2 == 1,
            "not negative": lambda v: v >= 0}


#: seeded layouts of the hidden file, built once for every guess (a module fixture: its tests
#: share one xdist worker)
_RUNS = 400


@pytest.fixture(scope="module")
def layouts() -> list:
    return [build_layout({"tests/test_p.py": _HIDDEN}, _IDS, rng=random.Random(seed))
            for seed in range(_RUNS)]


@pytest.mark.pure  # layouts only
@pytest.mark.parametrize("name", sorted(_GUESSES))
def test_a_forger_seeing_one_test_at_a_time_resolves_no_more_often_than_a_coin_per_test(name, layouts):
    runs = len(layouts)
    wins = sum(_forger_wins(layout, _GUESSES[name]) for layout in layouts)
    chance = 0.5 ** len(_IDS)  # a coin flip per pair: what indistinguishable mutants allow
    assert wins / runs <= 2 * chance, f"guessing {name!r} resolved {wins} of {runs} gradings"


_FORMS = """from m import f, g, h


def test_a():
    assert f(3, "abc") == 17
    assert g(2.5) == 1.25
    assert h("Hello World") == "hello-world"
    assert f(-2, "x") == -40
    assert g(-0.5) == -10.5
"""


def _form(value):
    if isinstance(value, bool):
        return (bool,)
    if isinstance(value, int):
        return (int, value < 0, len(str(abs(value))))
    if isinstance(value, float):
        whole, _, frac = repr(abs(value)).partition(".")
        return (float, value < 0, len(whole), len(frac))
    return (str, len(value), tuple("a" if c.islower() else "A" if c.isupper() else
                                   "0" if c.isdigit() else c for c in value))


@pytest.mark.pure  # layouts only
def test_a_mutated_value_keeps_the_form_of_the_real_one():
    """What the red team's classifier read from a mutant alone (a negative number where the
    real one is not, a longer float, a letter the inputs do not have) is kept: the changed
    value has the real one's sign, digit count, float repr length, and its string's length and
    character classes, unless it is made of the test's own input words."""
    inputs = {"abc", "x", "Hello", "World", "Hello World"}
    changed_kinds = set()
    for seed in range(300):
        module = ast.parse(_FORMS)
        func = module.body[1]
        assert mutate_test(func, random.Random(seed), module)
        old = [n for n in ast.walk(ast.parse(_FORMS)) if isinstance(n, ast.Constant)]
        new = [n for n in ast.walk(module) if isinstance(n, ast.Constant)]
        assert len(old) == len(new)
        diffs = [(a.value, b.value) for a, b in zip(old, new, strict=True) if a.value != b.value]
        assert len(diffs) == 1, diffs
        (before, after), = diffs
        assert type(before) is type(after)
        changed_kinds.add(type(before))
        if isinstance(before, str):
            words = re.findall(r"\w+", after)
            assert _form(after) == _form(before) or all(w in " ".join(inputs) for w in words), \
                (before, after)
        else:
            assert _form(after) == _form(before), (before, after)
    assert changed_kinds == {int, float, str}


@pytest.mark.sandbox
@pytest.mark.parametrize("withheld", [True, False])
def test_a_forger_that_reads_the_mutants_is_not_graded_resolved(tmp_path: Path, withheld: bool,
                                                                monkeypatch):
    """The forger that reads every generated file, run for real in a grading sandbox: it finds
    only its own test's file. With the expected values withheld (the grading's default) the
    file holds none, so its tests fail; with them left in the file (the fallback for checks that
    cannot be withheld) it returns its file's value and passes each test *and* its mutant."""
    require_tool("bwrap")
    if not withheld:
        import proofgym.verify.sandboxed.isolated as isolated
        monkeypatch.setattr(isolated, "withhold_layout", lambda layout, files, keep=None: {})
    (tmp_path / "primes.py").write_text("def count_below(n):\n    raise NotImplementedError\n")
    (tmp_path / "tests").mkdir()
    seed = 3
    run = run_tests_isolated(tmp_path, {"primes.py": _FORGER}, tests=_IDS,
                             hidden={"tests/test_p.py": _HIDDEN}, rng=random.Random(seed),
                             timeout_s=60)
    assert run.mutants == len(_IDS)  # every hidden test had its mutant
    verdict = swebench_verdict(run, _IDS, [])
    assert verdict.reward == 0.0, (run.results, run.failure, verdict.reason)
    if withheld:
        assert run.failure is None and set(run.results.values()) == {"failed"}, run.results
    else:
        assert run.failure == "tampering_detected", (run.results, run.failure, verdict.reason)
