"""Withheld expected values (:mod:`proofgym.verify.sandboxed.withheld`): which checks are
rewritten, that no literal expected value is left in a rewritten hidden test, and how the host
judges what a test process observed. The grading itself (a real sandbox, real attacks) is in
``tests/security/test_attack_expected_values.py``."""

from __future__ import annotations

import ast
import json
import random
from collections import Counter

import pytest

from proofgym.envs.code_repair import code_repair_tasks
from proofgym.programs.pytest_runner import _plain
from proofgym.verify.sandboxed import mutant_seed_of
from proofgym.verify.sandboxed import test_sources as sources_of
from proofgym.verify.sandboxed.mutants import build_layout
from proofgym.verify.sandboxed.withheld import (
    OBSERVE,
    Choice,
    Expectation,
    Repeat,
    checks_of,
    encode,
    judge,
    verdicts,
    withhold_source,
)

pytestmark = pytest.mark.pure

_FORMS = '''import pytest
from pytest import approx


class TestT:
    def test_u(self):
        self.assertEqual(f(1), "one")
        self.assertIn(f(2), ("x", "y"))
        self.assertIsNone(f(3))
        self.assertAlmostEqual(g(1), 0.333, places=3)


def test_forms():
    assert f(1) == "one"
    assert "two" == f(2)
    assert f(3) != [1, 2]
    assert f(4) < 10
    assert f(5) in {"a", "b"}
    assert "k" not in f(6)
    assert f(7) is None
    assert f(8) is True
    assert g(0.1) == pytest.approx(0.3, rel=1e-3)
    assert approx([0.5, 1.0]) == g(2)
    with open("x"):
        assert f(9) == (1, "z")
    try:
        assert f(10) == {"k": b"v"}
    finally:
        pass
    for _ in range(3):
        assert f(11) == 11.5
    assert f(12) == "kept", "a message that may quote the expected value: kept"


def test_kept():
    for x in xs():
        assert f(x) != "loop"
    for x in xs():
        if x:
            break
        assert f(x) == "loop"
    if cond():
        assert f(1) == "branch"
    if cond():
        assert f(1) == "branch"
    else:
        assert f(2) not in ("other",)
    if cond():
        assert f(1) == "branch"
    elif cond():
        assert f(1) == "branch"
    with pytest.raises(ValueError):
        assert f(2) == "raises"
    assert f(3) == helper("call")
    assert f(4) == f(5)
    assert f(6)
'''


def _expected_literals(source: str, name: str) -> list[object]:
    func = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef)
                and n.name == name)
    return [c.value for c in ast.walk(func) if isinstance(c, ast.Constant)]


def test_every_form_of_check_against_a_literal_is_withheld():
    source, checks = withhold_source(_FORMS, "test_forms")
    text = source.decode()
    ops = [(c.op, c.expected, c.literal_left) for c in checks]
    assert ops[:10] == [("==", "one", False), ("==", "two", True), ("!=", [1, 2], False),
                        ("<", 10, False), ("in", {"a", "b"}, False), ("is", False, False),
                        ("is", None, False), ("is", True, False), ("approx", 0.3, False),
                        ("approx", [0.5, 1.0], False)]
    assert checks[8].rel == 1e-3
    assert [c.site for c in checks] == [*range(13), 12, 12, 13]  # the loop's check, 3 times
    for gone in ("one", "two", 0.3, 11.5, "kept", b"v", "a message that may quote the expected "
                 "value: kept"):
        assert gone not in _expected_literals(text, "test_forms"), gone
    assert "assert" not in text.split("def test_forms")[1].split("def test_kept")[0]
    assert text.count(OBSERVE) == 14  # the other tests of the file are not this one's


def test_unittest_assertions_are_withheld():
    _, checks = withhold_source(_FORMS, "test_u", "TestT")
    assert [(c.op, c.expected) for c in checks] == [("==", "one"), ("in", ("x", "y")),
                                                    ("is", None), ("almost", 0.333)]
    assert checks[3].places == 3


def test_checks_a_forger_could_skip_keep_their_literal():
    """A loop the run counts whose checks a random value meets, a loop that can end early, an
    ``if`` without ``else``, a branch without a check the forger must match: a forger could
    steer past every literal the host holds, so they stay in the file (mutants cover them)."""
    source, checks = withhold_source(_FORMS, "test_kept")
    assert checks == []
    assert source == _FORMS.encode()


_RUN_DECIDES = '''def test_r():
    assert f(0) == 0
    for x in xs():
        assert f(x) == "a"
        for y in [1, 2]:
            assert g(y) != "b"
    if c():
        assert f(1) == 1
    elif d():
        assert f(2) == 2
    else:
        assert f(3) in (None, 0)
'''


def test_loops_and_branches_the_run_decides():
    """A loop over a computed iterable: its checks once per iteration, at least once; an
    ``if``/``else`` (``elif`` chains with a final ``else``): exactly one branch's checks."""
    source, pattern = withhold_source(_RUN_DECIDES, "test_r")
    assert "assert" not in source.decode() and '"a"' not in source.decode()
    _, loop, branch = pattern
    assert isinstance(loop, Repeat) and [c.site for c in loop.body] == [1, 2, 2]
    assert isinstance(branch, Choice) and len(branch.alternatives) == 2
    assert [c.site for c in checks_of(pattern)] == [0, 1, 2, 2, 3, 4, 5]
    good = {0: 0, 1: "a", 2: "x", 3: 1, 4: 2, 5: None}

    def run(*sites, **wrong):
        values = [wrong.get(f"s{s}", good[s]) for s in sites]
        return verdicts({"g": pattern}, {"g": _payload(*values, sites=list(sites))})["g"]

    for sites in ((0, 1, 2, 2, 3), (0, 1, 2, 2, 1, 2, 2, 4), (0, 1, 2, 2, 5)):
        assert run(*sites) is None, sites
    assert run(0, 3)[0] == "wrong"  # the loop ran no iteration (wrong code may return [])
    for sites in ((0, 1, 2, 3),  # an iteration cut short
                  (0, 1, 2, 2),  # no branch
                  (0, 1, 2, 2, 3, 4),  # two branches
                  (0, 1, 2, 2, 4, 3)):
        assert run(*sites)[0] == "unobserved", sites
    assert run(0, 1, 2, 2, 1, 2, 2, 3, s1="b")[0] == "wrong"
    assert run(0, 1, 2, 2, 5, s5=1)[0] == "wrong"


def test_deeply_nested_loops_are_judged_in_polynomial_time():
    pattern = [Repeat((Repeat((Repeat((Expectation("==", 1, 0, 1),)),)),))]
    payload = _payload(*([1] * 400), sites=[0] * 400)
    assert verdicts({"g": pattern}, {"g": payload}) == {"g": None}


def test_no_literal_expected_value_is_left_in_a_bundled_hidden_test():
    """Every hidden test of every bundled CodeRepair task, as a grading lays it out (real and
    mutant): no check of its generated file compares with a literal any more, and each withheld
    expected value is gone from it (what is left of that value is the test's input)."""
    from proofgym.verify.sandboxed.withheld import withhold_layout

    for task in code_repair_tasks():
        hidden = task.hidden_files
        sources = sources_of(task.repo, {}, hidden, task.test_files)
        layout = build_layout(sources, task.test_ids, rng=random.Random(1),
                              mutate_files=list(hidden), mutant_seed=mutant_seed_of(hidden))
        before = dict(layout.files)
        withheld = withhold_layout(layout, list(hidden))
        for gen in layout.run:
            real = layout.real.get(gen) or layout.mutant[gen]
            if real.split("::")[0] not in hidden:
                continue
            path, name = gen.split("::")[0], gen.split("::")[-1]
            func = _function(layout.files[path], name)
            for node in ast.walk(func):  # what is left compares with no literal
                if isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare):
                    for side in (node.test.left, *node.test.comparators):
                        with pytest.raises(ValueError):
                            ast.literal_eval(side)
            if gen not in withheld:  # nothing to withhold ([date(...)], a helper's value)
                continue
            old, new = _strings(_function(before[path], name)), _strings(func)
            sites = {c.site: c.expected for c in checks_of(withheld[gen]) if isinstance(c.expected, str)}
            for value in set(sites.values()):
                gone = sum(v == value for v in sites.values())
                assert new[value] == old[value] - gone, (task.id, gen, value)


def _function(source: bytes, name: str) -> ast.FunctionDef:
    return next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef)
                and n.name == name)


def _strings(func: ast.AST) -> Counter:
    return Counter(c.value for c in ast.walk(func) if isinstance(c, ast.Constant)
                   and isinstance(c.value, str))


def _payload(*values, sites=None) -> str:
    sites = sites if sites is not None else range(len(values))
    return json.dumps([[s, _plain(v, 0)] for s, v in zip(sites, values, strict=True)])


def test_the_host_compares_with_python_semantics():
    _, checks = withhold_source(_FORMS, "test_forms")
    good = [lambda: "one", "two", (1, 2), 9, "a", False, None, True, 0.3002, (0.5, 1.0),
            (1, "z"), {"k": b"v"}, 11.5, 11.5, 11.5, "kept"]
    good[0] = "one"
    assert verdicts({"g": checks}, {"g": _payload(*good, sites=[c.site for c in checks])}) == \
        {"g": None}
    for at, wrong in ((0, "onf"), (1, "twO"), (2, [1, 2]), (3, 10), (4, "c"), (5, True), (6, 0),
                      (7, 1), (8, 0.31), (9, [0.5, 1.1]), (10, [1, "z"]), (13, 11.0)):
        values = list(good)
        values[at] = wrong
        kind, why = verdicts({"g": checks},
                             {"g": _payload(*values, sites=[c.site for c in checks])})["g"]
        assert kind == "wrong" and "withheld check" in why, (at, wrong)
        if checks[at].op == "==" and isinstance(checks[at].expected, str):
            assert repr(checks[at].expected) not in why  # the message never quotes the literal


def test_observations_missing_reordered_or_forged_fail():
    _, checks = withhold_source("def test_a():\n    assert f(1) == 2\n    assert f(2) == 3\n",
                                "test_a")
    ok = _payload(2, 3)
    assert verdicts({"g": checks}, {"g": ok}) == {"g": None}
    for bad in (None, "[]", _payload(2), _payload(3, 2, sites=[1, 0]), _payload(2, 3, 3),
                "not json"):  # not the test's own statements: tampering
        assert verdicts({"g": checks}, {} if bad is None else {"g": bad})["g"][0] == "unobserved"
    for bad in (json.dumps([[0, {"unplain": "Foo"}], [1, 3]]), json.dumps([[0, {"big": True}], [1, 3]]),
                json.dumps([[0, {"s": [[1]]}], [1, 3]])):  # values that do not hold
        assert verdicts({"g": checks}, {"g": bad})["g"][0] == "wrong", bad


def test_checks_a_task_keeps_stay_asserts_and_unplain_values_are_named():
    """``keep`` (a task's ``unwithheld`` list, by the computed side's source) leaves those checks
    asserts with their literal; the others are withheld as before, and a value sent as no plain
    data is named by its check (what a reference run records)."""
    from proofgym.verify.sandboxed.withheld import unplain

    source = "def test_a():\n    f = frame()\n    assert f.flags == set()\n    assert f.size == 13\n"
    out, checks = withhold_source(source, "test_a", keep=["f.flags"])
    assert "assert f.flags == set()" in out.decode() and "13" not in out.decode()
    assert [(c.computed, c.expected) for c in checks_of(checks)] == [("f.size", 13)]
    _, every = withhold_source(source, "test_a")
    assert [c.computed for c in checks_of(every)] == ["f.flags", "f.size"]
    sent = json.dumps([[0, {"unplain": "a Flags object is not plain data"}], [1, 13]])
    assert unplain({"g": every}, {"g": sent}) == {"g": ("f.flags",)}
    assert verdicts({"g": every}, {"g": sent})["g"][0] == "wrong"
    assert unplain({"g": checks}, {"g": json.dumps([[0, 13]])}) == {}


def test_a_records_unwithheld_list_round_trips_and_is_left_out_when_empty():
    from proofgym.envs.repo_repair import MANIFEST
    from proofgym.tasks.synth import TaskRecord, read_manifest

    record = read_manifest(MANIFEST)[0]
    plain = {k: v for k, v in record.to_dict().items() if k != "unwithheld"}
    assert "unwithheld" not in TaskRecord.from_dict(plain).to_dict()
    kept = TaskRecord.from_dict({**plain, "unwithheld": {"t.py::test_a": ["f.flags"]}})
    assert kept.unwithheld == {"t.py::test_a": ("f.flags",)}
    assert TaskRecord.from_dict(kept.to_dict()) == kept


def test_only_plain_values_are_sent():
    class Always:
        def __eq__(self, other):
            return True

    class Text(str):
        def __eq__(self, other):
            return True

    class Name(str):  # keeps str's comparison: sent as the str it holds
        def __repr__(self):
            return "forged"

    for value in (Always(), Text("x"), [1, Always()], {"k": Text("v")}):
        with pytest.raises(TypeError):
            _plain(value, 0)
    assert _plain(Name("abc"), 0) == "abc"
    for value in (None, True, 3, 2.5, float("inf"), "s", b"b", bytearray(b"y"), (1, [2]),
                  {1: {2, 3}}, frozenset({1}), 1 + 2j):
        assert _plain(value, 0) == encode(value)
    for value in (None, True, 3, 2.5, "s", b"b", (1, [2]), {1: {2, 3}}, 1 + 2j):
        assert judge(withhold_source(f"def test_a():\n    assert f() == {value!r}\n",
                                     "test_a")[1][0], _plain(value, 0)), value


def test_the_bench_reports_every_bundled_code_repair_literal_withheld():
    """``bench/mutant_classifier.py --withheld`` counts the hidden checks against a literal and
    those withheld; for CodeRepair every one is (RepoRepair's share needs its sdists: the docs
    quote it)."""
    import importlib.util
    import io
    import sys
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / "bench" / "mutant_classifier.py"
    spec = importlib.util.spec_from_file_location("mutant_classifier_withheld", path)
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench  # its dataclasses look their module up
    spec.loader.exec_module(bench)
    counts = bench._code_repair_withheld()
    assert counts.tasks == 16 and counts.literal >= 90, counts
    assert counts.withheld == counts.literal, counts.kept
    out = io.StringIO()
    bench.report_withheld([(counts, 0)], out=out)
    assert "100.0%" in out.getvalue()


_TABLES = '''import pytest
CASES = [("a", 1), ("b", 2)]
NAMES = {"x": 1, "y": 2, "z": 3}
GROWN = [1, 2]
GROWN.append(3)
SHADOWED = [1]
ROWS = (1, 2)
QUEUE = [1, 2]


def helper(SHADOWED):
    return ROWS[0]


def test_t():
    for word, _ in CASES:
        assert f(word) == "w"
    for i, (k, v) in enumerate(NAMES.items()):
        assert f(k) == 3
    for a, b in zip(CASES, range(5)):
        assert f(a) == 1
    for x in sorted(ROWS):
        assert f(x) == 4
    for g in GROWN:
        assert f(g) == 2
    for s in SHADOWED:
        assert f(s) == 2
    drain(QUEUE)  # code under test may honestly consume a list it is given
    for q in QUEUE:
        assert f(q) == 2
'''


def test_loops_over_module_tables_are_counted_by_the_host():
    """A name bound once to a literal at module level, never rebound, shadowed, changed in
    place or handed to other code in the file (and ``zip``/``enumerate``/``sorted``/``.items()``
    of such): the host pins the iteration count; any other table is counted by the run."""
    _, pattern = withhold_source(_TABLES, "test_t")
    flat = [type(p).__name__ if isinstance(p, Repeat) else p.site for p in pattern]
    assert flat == [0, 0, 1, 1, 1, 2, 2, 3, 3, "Repeat", "Repeat", "Repeat"]
    checks = [c.site for c in checks_of(pattern)]
    ok = _payload(*(["w"] * 2 + [3] * 3 + [1] * 2 + [4] * 2 + [2, 2, 2]),
                  sites=[*checks[:9], 4, 5, 6])
    assert verdicts({"g": pattern}, {"g": ok}) == {"g": None}
    short = _payload(*(["w"] + [3] * 3 + [1] * 2 + [4] * 2 + [2, 2, 2]),
                     sites=[*checks[1:9], 4, 5, 6])
    assert verdicts({"g": pattern}, {"g": short})["g"][0] == "unobserved"


def test_a_branch_or_counted_loop_whose_checks_a_guess_meets_keeps_its_literals():
    """``is None``, ``!=``, ``<`` in every iteration or in one branch: a forger steering there
    passes without matching an unseen literal, so nothing of that loop or ``if`` is withheld."""
    source = ("def test_g():\n    for x in xs():\n        assert f(x) is None\n"
              "    if c():\n        assert f(1) == 'a'\n    else:\n        assert f(2) < 3\n")
    out, pattern = withhold_source(source, "test_g")
    assert pattern == [] and out == source.encode()
