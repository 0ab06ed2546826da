"""Attack: a solution that fixes nothing tells each hidden test from its mutant by how it looks.

The red team's classifier (``bench/mutant_classifier.py``), calibrated on a task's visible tests,
called a generated test file a mutant when its expected values held something the inputs did not
(a value absent from them, a negative number, a long float) or its check was negated; it forced a
pass on the files that looked real and left the others to the buggy code. Mutants were one value
moved by +-1..4 (or a changed character), and a test with no value to change had its assert
negated: offline, over the grader's own layouts of all 16 bundled CodeRepair tasks, the classifier
picked the real test of every pair in 171 of 1600 gradings against 28 expected by chance (2^-k
for k mutated hidden tests), csv-quoted-fields 0.72, ini-parser-continuation 0.74. Seven hidden
tests had no mutant at all (``pytest.raises`` only, nested loops) and passed for free.

The fix (:mod:`proofgym.verify.sandboxed.mutants`): a changed value is drawn from the values of the same
kind the task's tests hold and keeps the old one's form and its relation to the test's inputs;
no mutant negates an assert; ``pytest.raises`` tests, truth checks, helper-style
(``check(candidate)``) tests and tests without a value to change get mutants of their own kinds.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import os
import random
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from proofgym.envs.code_repair import code_repair_tasks
from proofgym.verify.sandboxed.mutants import build_layout

#: AST work and plain pytest in a temporary directory: no sandbox, nothing privileged
pytestmark = pytest.mark.pure

_BENCH = Path(__file__).resolve().parents[2] / "bench" / "mutant_classifier.py"


@functools.cache
def _bench():
    spec = importlib.util.spec_from_file_location("mutant_classifier", _BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def results():
    """25 seeded layouts of each bundled task, classified once for both tests (a module fixture:
    they share one xdist worker)."""
    return _bench().evaluate(layouts=25, seed=11)


@pytest.mark.slow
def test_the_classifier_forges_no_more_gradings_than_chance(results):
    """25 seeded layouts of each bundled task: the classifier's forges are within a one-sided
    binomial bound of what a coin per pair gets (2^-k per grading); before the fix it forged
    about 6 times chance (bench/mutant_classifier.py --root on the old mutants)."""
    bench = _bench()
    forged = sum(r.forged for r in results)
    chance = [r.chance for r in results for _ in range(r.layouts)]
    tail = bench.poisson_binomial_tail(chance, forged)
    assert tail > 0.01, f"{forged} forged gradings of {len(chance)}, P(that many | chance) = {tail:.2g}"
    for r in results:
        assert bench.binom_tail(r.layouts, r.chance, r.forged) > 0.001, (r.task, r.forged, r.k)


def test_the_red_team_cues_tell_no_pair_apart(results):
    """Negative numbers, long floats, impossible dates, unseen exception types and negated checks
    appear in no mutant that its real test lacks; a value absent from the inputs, or a character
    no input has, marks a mutant in a few pairs only (tests whose every expected token is an
    input, such as ``['x', '', '"']`` from ``'x,"",""""'``, leave nothing else to change)."""
    right = sum((r.pair_right for r in results), start=Counter())
    pairs = sum(r.k * r.layouts for r in results)
    for cue in ("negative", "long_float", "negated", "bad_date", "exception", "digits"):
        assert right[cue] == 0, (cue, right[cue])
    assert right["absent"] + right["chars"] <= 0.03 * pairs, (right, pairs)


@pytest.fixture(scope="module")
def layouts():
    """Each bundled task's layouts of seeds 0-4, built once for the two tests that read them
    (neither changes a layout; a module fixture: they share one xdist worker)."""
    found = []
    for task in code_repair_tasks():
        visible = {p: (task.repo / p).read_bytes() for p in task.test_files
                   if p not in task.hidden_files}
        sources = {**visible, **task.hidden_files}
        for seed in range(5):
            found.append((task, build_layout(sources, task.test_ids, rng=random.Random(seed),
                                             mutate_files=list(task.hidden_files))))
    return found


def test_every_hidden_test_of_every_bundled_task_gets_a_mutant(layouts):
    for task, layout in layouts:
        hidden = [t for t in task.test_ids if t.split("::")[0] in task.hidden_files]
        assert layout.unmutable == [], (task.id, layout.unmutable)
        assert sorted(layout.mutant.values()) == sorted(hidden), task.id


def _polarities(func: ast.FunctionDef) -> list[str]:
    """Each assert's comparison operators and whether it is negated, in order."""
    out = []
    for node in ast.walk(func):
        if isinstance(node, ast.Assert):
            test = node.test
            negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
            inner = test.operand if negated else test
            ops = [type(o).__name__ for o in inner.ops] if isinstance(inner, ast.Compare) else []
            out.append(f"{'not ' if negated else ''}{' '.join(ops)}")
    return out


def test_no_mutant_negates_an_assert(layouts):
    """A mutant keeps every assert of its test with the same operators and polarity (it may add
    asserts in front, copied from another test with their own polarity, and swap two operands
    of ``<``); the old ``!=`` / ``assert not`` mutant of a value-less check is gone."""
    for task, layout in layouts:
        real_of = {of: gen for gen, of in layout.real.items()}
        for gen, of in layout.mutant.items():
            mutant = _func(layout.files[gen.split("::")[0]])
            real = _func(layout.files[real_of[of].split("::")[0]])
            theirs, mine = _polarities(real), _polarities(mutant)
            assert mine[len(mine) - len(theirs):] == theirs, (task.id, of, theirs, mine)


def _func(source: bytes) -> ast.FunctionDef:
    return next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef)
                and n.name.startswith("test"))


def _pytest(root: Path, files: list[str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", "-q",
                           *files], cwd=root, env=env, capture_output=True, text=True, timeout=300)
    found = re.findall(r"^(PASSED|FAILED|ERROR|SKIPPED) (\S+::\S+)", proc.stdout, re.MULTILINE)
    return {node: status.lower() for status, node in found}


_SOLUTION = '''
def parse_count(text):
    if not text.isdigit():
        raise ValueError(f"not a count: {text!r}")
    return int(text)


def total(values):
    return sum(values)
'''

_RAISES_ONLY = '''import pytest

from solution import parse_count


def test_parses():
    assert parse_count("12") == 12


def test_rejects_words():
    for bad in ("ab", "x1", "-3"):
        with pytest.raises(ValueError):
            parse_count(bad)


def test_rejects_empty():
    with pytest.raises(ValueError, match="not a count"):
        parse_count("")


def test_rejects_anything_else():
    with pytest.raises(ValueError):
        parse_count(str(None) + "x")
'''

_CHECK_STYLE = '''from solution import total

METADATA = {"author": "bench"}


def check(candidate):
    assert candidate([1, 2, 3]) == 6
    assert candidate([]) == 0
    assert candidate([10, -4]) == 6


def test_check():
    check(total)
'''


def test_raises_only_and_check_style_tests_get_mutants_that_correct_code_fails(tmp_path: Path):
    """Real pytest runs of each layout, with a correct solution: every real test passes and every
    mutant fails (a mutant correct code passes would flag an honest solution as tampering).
    ``test_rejects_words`` gets a returning input in its loop, ``test_rejects_empty`` its pattern
    or input changed, ``test_rejects_anything_else`` (no literal input) its builtin exception type
    swapped, ``test_check`` an expected value of its helper changed."""
    (tmp_path / "solution.py").write_text(_SOLUTION)
    sources = {"test_raises.py": _RAISES_ONLY.encode(), "test_check.py": _CHECK_STYLE.encode()}
    ids = ["test_raises.py::test_parses", "test_raises.py::test_rejects_words",
           "test_raises.py::test_rejects_empty", "test_raises.py::test_rejects_anything_else",
           "test_check.py::test_check"]
    files, layouts = {}, []
    for seed in range(6):
        layout = build_layout(sources, ids, rng=random.Random(seed), taken=[*files, *sources])
        assert layout.unmutable == [] and sorted(layout.mutant.values()) == sorted(ids), seed
        files.update(layout.files)
        layouts.append(layout)
    kinds = set()
    for layout in layouts:
        for gen, of in layout.mutant.items():
            text = layout.files[gen.split("::")[0]].decode()
            if of.endswith("test_check"):
                helper = next(n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef)
                              and n.name == "check")
                assert ast.unparse(helper) != ast.unparse(ast.parse(_CHECK_STYLE).body[2])
                kinds.add("helper")
            if of.endswith("test_rejects_anything_else"):
                assert "pytest.raises(ValueError)" not in text, text
                kinds.add("exception")
            if of.endswith("test_rejects_words"):
                assert "'12'" in text, text  # the input another test shows returning
                kinds.add("input")
    assert kinds == {"helper", "exception", "input"}
    for path, content in files.items():
        (tmp_path / path).write_bytes(content)
    outcome = _pytest(tmp_path, sorted(files))
    for layout in layouts:
        for gen, of in layout.real.items():
            assert outcome.get(gen) == "passed", (of, outcome.get(gen))
        for gen, of in layout.mutant.items():
            assert outcome.get(gen) == "failed", (of, outcome.get(gen), files[gen.split("::")[0]])


@pytest.mark.slow
def test_every_mutant_of_the_bundled_tasks_fails_with_the_reference_fix(tmp_path: Path):
    """Plain pytest over two layouts of each bundled task with its reference fix applied: every
    real test passes, every mutant fails (a mutant with a value equal to the real one, or a
    ``Decimal("00.16")`` for ``Decimal("0.16")``, would pass)."""
    for task in code_repair_tasks():
        visible = {p: (task.repo / p).read_bytes() for p in task.test_files
                   if p not in task.hidden_files}
        sources = {**visible, **task.hidden_files}
        root = tmp_path / task.id
        shutil.copytree(task.repo, root)
        for path, content in task.solution_files.items():
            (root / path).write_bytes(content)
        files, layouts = {}, []
        for seed in (101, 202):
            layout = build_layout(sources, task.test_ids, rng=random.Random(seed),
                                  mutate_files=list(task.hidden_files), taken=[*files, *sources])
            files.update(layout.files)
            layouts.append(layout)
        for path, content in files.items():
            (root / path).write_bytes(content)
        outcome = _pytest(root, sorted(files))
        for layout in layouts:
            for gen, of in layout.real.items():
                assert outcome.get(gen) == "passed", (task.id, of, outcome.get(gen))
            for gen, of in layout.mutant.items():
                assert outcome.get(gen) == "failed", (task.id, of, outcome.get(gen),
                                                      files[gen.split("::")[0]].decode())


_GUARDS = '''import pytest

from m import f, g


@pytest.mark.skip
def test_skipped():
    assert f("7") == 7


def test_early():
    if g():
        return
    assert f("3") == 3


def test_raises():
    with pytest.raises(ValueError):
        f("x")
'''


def test_only_checks_that_surely_run_change_and_only_graded_tests_vouch_for_an_input():
    """A check after an early ``return`` may not run (its mutant would pass with correct code),
    and a skipped test's call may raise: neither is used. ``test_early`` gets the changed body of
    ``test_raises`` in front; ``test_raises`` another builtin exception, never the input "7"."""
    ids = ["t.py::test_early", "t.py::test_raises"]
    for seed in range(30):
        layout = build_layout({"t.py": _GUARDS.encode()}, ids, rng=random.Random(seed))
        assert sorted(layout.mutant.values()) == ids, seed
        for gen, of in layout.mutant.items():
            text = layout.files[gen.split("::")[0]].decode()
            body = text.split(f"def {gen.split('::')[1]}", 1)[1]
            assert "'7'" not in body, body
            if of.endswith("test_early"):
                assert body.rstrip().endswith("assert f('3') == 3"), body
                assert "pytest.raises(ValueError)" not in body and "f('x')" in body, body
            else:
                assert "pytest.raises(ValueError)" not in body and "f('x')" in body, body


def test_a_mutant_built_from_another_test_flags_tampering_only_where_that_test_passes():
    """``test_rejects_words``'s mutant expects ``parse_count("12")`` to raise, which
    ``test_parses`` shows it does not. Wrong code that raises for every input passes the real
    test and the mutant and fails ``test_parses``: that is a failed grading, not tampering (the
    buggy roman-numeral task did this). Passing all three is impossible for code that computes
    anything: tampering."""
    from proofgym.verify.sandboxed.policy import summarise as _summarise

    ids = ["test_raises.py::test_parses", "test_raises.py::test_rejects_words"]
    layout = build_layout({"test_raises.py": _RAISES_ONLY.encode()}, ids, rng=random.Random(1))
    gen = next(g for g, of in layout.mutant.items() if of == ids[1])
    assert layout.witnesses[gen] == [ids[0]]
    real = {of: g for g, of in layout.real.items()}
    raw = {g: "passed" for g in layout.run}
    raw[real[ids[0]]] = "failed"  # raises for "12" too
    raw.update({g: "failed" for g, of in layout.mutant.items() if of != ids[1]})
    wrong = _summarise(layout, raw, None, 0, False, "", (), {})
    assert not wrong.tampered and wrong.results[ids[0]] == "failed", wrong
    raw[real[ids[0]]] = "passed"
    forged = _summarise(layout, raw, None, 0, False, "", (), {})
    assert forged.tampered and forged.failure == "tampering_detected", forged
