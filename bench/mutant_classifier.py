"""Can a solution that fixes nothing tell a hidden test from its mutant? The red team's classifier.

    python bench/mutant_classifier.py                  # this checkout's mutants, 100 layouts a task
    python bench/mutant_classifier.py --root /work/main --layouts 200
    python bench/mutant_classifier.py --withheld       # the share of expected values withheld only
    python bench/mutant_classifier.py --withheld --repo-repair-fixtures  # RepoRepair offline

``--withheld`` prints, per bundled env, how many hidden asserts compare with a literal expected
value and how many of those the grading withholds (:mod:`proofgym.verify.sandboxed.withheld`:
the literal stays on the host, the test process only sends what it computed), with the asserts
left in the file by where they are (a loop or branch a forger could steer past without matching
an unseen literal: an ``if`` without ``else``, a loop with a jump inside, an iteration or branch
whose checks a guess meets). RepoRepair counts the tasks whose project's sdist is in the cache
(``PROOFGYM_CACHE``; ``--repo-repair-fixtures`` seeds a temporary one with the test suite's
fixture sdists, nothing is downloaded).

Tamper detection (:mod:`proofgym.verify.sandboxed.mutants`) runs every hidden test with a mutant (the
same test, changed so that correct code fails it) and flags a grading where both pass. Code that
forces a pass on the tests that *look real* and leaves the ones that look like mutants to the
buggy code resolves a task, unflagged, when it picks the real one of every pair. Each test
process sees its own generated file only, so the choice is made from that one file, with the
visible tests (which the agent has) to calibrate on.

The classifier here is that adversary: per task, calibrated on the visible tests, it calls a file
a mutant when any of these cues is outside what the visible tests show:

* ``absent``: the share of the expected values' tokens (numbers, words; case-folded, accents
  dropped) that occur nowhere among the test's inputs;
* ``chars``: the share of the expected strings' characters that no input string has;
* ``negative``: a negative number in an expected value; ``long_float``: a float whose repr is
  longer than any in the visible tests; ``digits``: an int with more digits than any there;
* ``negated``: ``!=``, ``not in``, ``is not`` or ``assert not`` checks;
* ``unsorted``: an expected list of numbers sorted but for one item; ``bad_date``: a
  ``date(y, m, d)`` that cannot exist; ``exception``: a ``pytest.raises`` type the visible tests
  never expect;
* ``borrowed``: a first statement that checks a call of a function the rest of the test never
  calls (the shape of a check inserted into a test that had none to change).

Offline, with the grader's own layout (``build_layout`` over the visible and hidden test files,
mutants of the hidden ones only, as ``run_tests_isolated`` calls it) and no sandbox: the
classifier decides per generated file, and a grading is *forged* when it calls every real hidden
test real and every mutant a mutant. Chance is 2^-k for k mutated hidden tests (a coin per pair;
no classifier does better when a pair's two files are exchangeable). Tests without a mutant pass
for free and are counted as ``free``. Printed: per task the forge rate next to 2^-k with the
binomial tail probability of seeing that many forges by chance, the mean over tasks, and per cue
how often it told a pair apart the right way (it fired on the mutant only) and the wrong way (on
the real one only); for exchangeable pairs those two counts are equal within noise.
"""

from __future__ import annotations

import argparse
import ast
import datetime
import math
import os
import random
import re
import sys
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

_WORD = re.compile(r"[^\W_]+")
_NUM = re.compile(r"\d+(?:\.\d+)?")


def _normal(text: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFKD", text)
                   if not unicodedata.combining(c)).casefold()


def _tokens(values: Iterable[object]) -> set[str]:
    out: set[str] = set()
    for v in values:
        if isinstance(v, bool):
            out.add(str(v))
        elif isinstance(v, (int, float)):
            out.add(repr(abs(v)))
        elif isinstance(v, str):
            n = _normal(v)
            out |= set(_WORD.findall(n)) | {t.lstrip("0") or "0" for t in _NUM.findall(n)}
    return out


def _test_function(tree: ast.Module) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            return node
    return None


def _constants(node: ast.AST) -> list[ast.Constant]:
    return [n for n in ast.walk(node) if isinstance(n, ast.Constant)]


def _expected_side(test: ast.Compare) -> ast.expr | None:
    """The side of ``a == b`` that holds the expected value: the one with constants and no
    names but callees (``[date(2024, 1, 2)]``, ``"x"``), the right one when both qualify."""
    def literalish(node: ast.expr) -> bool:
        callees = {id(c.func) for c in ast.walk(node) if isinstance(c, ast.Call)}
        names = [n for n in ast.walk(node) if isinstance(n, (ast.Name, ast.Attribute))
                 and id(n) not in callees and not (isinstance(n, ast.Name) and n.id.isupper())]
        inner = [n for c in ast.walk(node) if isinstance(c, ast.Call) for n in ast.walk(c.func)
                 if isinstance(n, ast.Name) and n.id != getattr(c.func, "id", None)]
        return bool(_constants(node)) and not names and not inner
    sides = [test.left, test.comparators[0]]
    ok = [s for s in sides if literalish(s)]
    return ok[-1] if ok else None


@dataclass
class Features:
    """What the classifier reads from one test file."""

    absent: float = 0.0
    chars: float = 0.0
    negative: int = 0
    long_float: int = 0
    digits: int = 0
    negated: int = 0
    unsorted: int = 0
    bad_date: int = 0
    exceptions: set[str] = field(default_factory=set)
    borrowed: int = 0


def features(source: bytes | str) -> Features:
    tree = ast.parse(source)
    func = _test_function(tree)
    f = Features()
    if func is None:
        return f
    module_consts = [c for n in tree.body if isinstance(n, ast.Assign) for c in _constants(n.value)]
    expected_nodes: list[ast.expr] = []
    for node in ast.walk(func):
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            if isinstance(node.ops[0], (ast.NotEq, ast.NotIn, ast.IsNot)):
                f.negated += 1
            if isinstance(node.ops[0], ast.Eq):
                side = _expected_side(node)
                if side is not None:
                    expected_nodes.append(side)
        if isinstance(node, ast.Assert) and isinstance(node.test, ast.UnaryOp) and \
                isinstance(node.test.op, ast.Not):
            f.negated += 1
        if isinstance(node, ast.withitem) and isinstance(node.context_expr, ast.Call) and \
                getattr(node.context_expr.func, "attr", "") == "raises" and node.context_expr.args:
            first = node.context_expr.args[0]
            if isinstance(first, ast.Name):
                f.exceptions.add(first.id)
    expected_ids = {id(c) for e in expected_nodes for c in _constants(e)}
    inputs = [c.value for c in _constants(func) if id(c) not in expected_ids] + \
        [c.value for c in module_consts]
    expected = [c.value for e in expected_nodes for c in _constants(e)]
    exp_tokens, in_tokens = _tokens(expected), _tokens(inputs)
    f.absent = len(exp_tokens - in_tokens) / len(exp_tokens) if exp_tokens else 0.0
    in_chars = {c for v in inputs if isinstance(v, str) for c in _normal(v)}
    exp_chars = [c for v in expected if isinstance(v, str) for c in _normal(v) if c.isalnum()]
    f.chars = sum(c not in in_chars for c in exp_chars) / len(exp_chars) if exp_chars else 0.0
    parents = {id(c): p for p in ast.walk(func) for c in ast.iter_child_nodes(p)}
    for e in expected_nodes:
        for c in _constants(e):
            parent = parents.get(id(c))
            if isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.USub):
                f.negative += 1
            if isinstance(c.value, float):
                f.long_float = max(f.long_float, len(repr(c.value)))
            if isinstance(c.value, int) and not isinstance(c.value, bool):
                f.digits = max(f.digits, len(str(abs(c.value))))
        for node in ast.walk(e):
            if isinstance(node, ast.List) and len(node.elts) >= 3 and all(
                    isinstance(x, ast.Constant) and isinstance(x.value, (int, float))
                    and not isinstance(x.value, bool) for x in node.elts):
                vals = [x.value for x in node.elts]  # type: ignore[attr-defined]
                if vals != sorted(vals) and any(
                        vals[:i] + vals[i + 1:] == sorted(vals[:i] + vals[i + 1:]) for i in range(len(vals))):
                    f.unsorted += 1
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "date" and \
                    len(node.args) == 3 and all(isinstance(a, ast.Constant) for a in node.args):
                try:
                    datetime.date(*(a.value for a in node.args))  # type: ignore[attr-defined]
                except (ValueError, TypeError):
                    f.bad_date += 1
    body = [s for s in func.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    if len(body) > 1 and isinstance(body[0], ast.Assert):
        first_calls = {n.func.id for n in ast.walk(body[0]) if isinstance(n, ast.Call)
                       and isinstance(n.func, ast.Name)}
        rest_calls = {n.func.id for s in body[1:] for n in ast.walk(s) if isinstance(n, ast.Call)
                      and isinstance(n.func, ast.Name)}
        rest_names = {n.id for s in body[1:] for n in ast.walk(s) if isinstance(n, ast.Name)}
        first_names = {n.id for n in ast.walk(body[0]) if isinstance(n, ast.Name)} - first_calls
        if first_calls and not first_calls & rest_calls and not first_names & rest_names:
            f.borrowed = 1
    return f


CUES = ("absent", "chars", "negative", "long_float", "digits", "negated", "unsorted", "bad_date",
        "exception", "borrowed")


class Classifier:
    """Calibrated on one task's visible test functions: a cue fires when a file goes past the
    largest value any visible test shows (for ``exception``: a type none of them expects)."""

    def __init__(self, visible: Iterable[Features]) -> None:
        visible = list(visible)
        self.limits = {name: max((getattr(v, name) for v in visible), default=0)
                       for name in ("absent", "chars", "negative", "long_float", "digits", "negated",
                                    "unsorted", "bad_date", "borrowed")}
        self.exceptions = set().union(*(v.exceptions for v in visible)) if visible else set()

    def cues(self, f: Features) -> set[str]:
        fired = {name for name, limit in self.limits.items() if getattr(f, name) > limit}
        if f.exceptions - self.exceptions:
            fired.add("exception")
        return fired

    def looks_mutant(self, f: Features, only: str | None = None) -> bool:
        fired = self.cues(f)
        return bool(fired if only is None else fired & {only})


def _visible_features(sources: Mapping[str, bytes], build_layout: Callable) -> list[Features]:
    """Each visible test laid out alone, as the grader lays it out (so a test's own file, the
    only one a test process sees, is what the classifier is calibrated on)."""
    from proofgym.verify.sandboxed.mutants import list_tests
    ids = [i.node_id for p, s in sources.items() for i in list_tests(p, s)]
    layout = build_layout(sources, ids, rng=random.Random(0), with_mutants=False)
    return [features(layout.files[g.split("::")[0]]) for g in layout.run]


@dataclass
class TaskResult:
    task: str
    k: int
    layouts: int
    forged: int
    free: int
    pair_right: Counter = field(default_factory=Counter)  # cue -> pairs told apart correctly
    pair_wrong: Counter = field(default_factory=Counter)  # cue -> pairs told apart wrongly

    @property
    def chance(self) -> float:
        return 0.5 ** self.k

    @property
    def rate(self) -> float:
        return self.forged / self.layouts


def run_task(task, layouts: int, seed: int) -> TaskResult:
    from proofgym.verify.sandboxed.mutants import build_layout
    visible = {p: (task.repo / p).read_bytes() for p in task.test_files if p not in task.hidden_files}
    hidden = {p: c for p, c in task.hidden_files.items() if p.endswith(".py")}
    sources = {**visible, **hidden}
    clf = Classifier(_visible_features(visible, build_layout))
    hidden_ids = [t for t in task.test_ids if t.split("::")[0] in hidden]
    result = TaskResult(task.id, 0, layouts, 0, 0)
    for i in range(layouts):
        layout = build_layout(sources, task.test_ids, rng=random.Random(seed * 1_000_003 + i),
                              mutate_files=list(hidden))
        gen_of = {real: gen for gen, real in layout.real.items()}
        pairs = [(gen_of[of], gen) for gen, of in layout.mutant.items()]
        result.k = len(pairs)
        result.free = len([t for t in hidden_ids if t in layout.unmutable])
        feats = {g: features(layout.files[g.split("::")[0]]) for pair in pairs for g in pair}
        ok = True
        for real, mutant in pairs:
            r, m = clf.cues(feats[real]), clf.cues(feats[mutant])
            ok = ok and not r and bool(m)
            for cue in CUES:
                if cue in m and cue not in r:
                    result.pair_right[cue] += 1
                elif cue in r and cue not in m:
                    result.pair_wrong[cue] += 1
            result.pair_right["any"] += bool(m) and not r
            result.pair_wrong["any"] += bool(r) and not m
        result.forged += ok
    return result


def binom_tail(n: int, p: float, x: int) -> float:
    """P(X >= x) for X ~ Binomial(n, p)."""
    if x <= 0:
        return 1.0
    if p <= 0.0 or x > n:
        return 0.0
    if p >= 1.0:
        return 1.0
    lp, lq = math.log(p), math.log1p(-p)
    return min(1.0, sum(math.exp(math.lgamma(n + 1) - math.lgamma(j + 1) - math.lgamma(n - j + 1)
                                 + j * lp + (n - j) * lq) for j in range(x, n + 1)))


def poisson_binomial_tail(ps: list[float], x: int) -> float:
    """P(sum of independent Bernoulli(p_i) >= x), exactly (by convolution)."""
    dist = [1.0]
    for p in ps:
        new = [0.0] * (len(dist) + 1)
        for j, q in enumerate(dist):
            new[j] += q * (1 - p)
            new[j + 1] += q * p
        dist = new
    return sum(dist[x:])


def clopper_pearson_upper(x: int, n: int, alpha: float = 0.05) -> float:
    """One-sided upper confidence bound on a binomial rate (by bisection on the tail)."""
    if x >= n:
        return 1.0
    lo, hi = x / n, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if 1 - binom_tail(n, mid, x + 1) > alpha:  # P(X <= x | mid) > alpha: mid still plausible
            lo = mid
        else:
            hi = mid
    return hi


def evaluate(layouts: int = 100, seed: int = 1, tasks: Iterable | None = None) -> list[TaskResult]:
    from proofgym.envs.code_repair import code_repair_tasks
    return [run_task(t, layouts, seed) for t in (tasks if tasks is not None else code_repair_tasks())]


def report(results: list[TaskResult], out=sys.stdout) -> dict[str, float]:
    import proofgym.verify.sandboxed.mutants as mutants
    load = os.getloadavg()
    print(f"mutants from {Path(mutants.__file__).resolve()}; load average "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", file=out)
    print(f"{'task':34} {'k':>2} {'free':>4} {'forged':>9} {'rate':>6} {'2^-k':>7} {'P(>=|chance)':>12}",
          file=out)
    ps, xs, n = [], 0, 0
    for r in results:
        tail = binom_tail(r.layouts, r.chance, r.forged)
        print(f"{r.task:34} {r.k:>2} {r.free:>4} {r.forged:>4}/{r.layouts:<4} {r.rate:>6.3f} "
              f"{r.chance:>7.4f} {tail:>12.3f}", file=out)
        ps += [r.chance] * r.layouts
        xs += r.forged
        n += r.layouts
    mean_rate = sum(r.rate for r in results) / len(results)
    mean_chance = sum(r.chance for r in results) / len(results)
    tail = poisson_binomial_tail(ps, xs)
    upper = clopper_pearson_upper(xs, n)
    print(f"{'mean':34} {'':>2} {sum(r.free for r in results):>4} {xs:>4}/{n:<4} {mean_rate:>6.3f} "
          f"{mean_chance:>7.4f} {tail:>12.3f}", file=out)
    print(f"forge rate over all gradings {xs / n:.4f} (one-sided 95% upper bound {upper:.4f}) against "
          f"chance {mean_chance:.4f} ({sum(ps):.1f} forges expected); P(at least {xs} forges | chance) = "
          f"{tail:.3f}", file=out)
    right = sum((r.pair_right for r in results), Counter())
    wrong = sum((r.pair_wrong for r in results), Counter())
    pairs = sum(r.k * r.layouts for r in results)
    print(f"{pairs} pairs told apart, per cue: right (fired on the mutant only) / wrong (on the real "
          "test only)", file=out)
    for cue in (*CUES, "any"):
        total = right[cue] + wrong[cue]
        tail_cue = binom_tail(total, 0.5, right[cue]) if total else 1.0
        print(f"  {cue:11} {right[cue]:>6} / {wrong[cue]:<6} P(>= right | coin) = {tail_cue:.3g}", file=out)
    return {"forged": xs, "gradings": n, "pairs": pairs, "expected_by_chance": sum(ps),
            "mean_rate": mean_rate, "mean_chance": mean_chance,
            "tail": tail, "upper": upper}


@dataclass
class Withheld:
    """Hidden asserts of one env: all of them, those comparing with a literal expected value,
    those the grading withholds, and where the rest of the literal ones are (by kind)."""

    env: str
    tasks: int = 0
    asserts: int = 0
    literal: int = 0
    withheld: int = 0
    kept: Counter = field(default_factory=Counter)

    @property
    def share(self) -> float:
        return self.withheld / self.literal if self.literal else 1.0


def _literal_side(nodes: Iterable[ast.expr]) -> bool:
    for node in nodes:
        try:
            ast.literal_eval(node)
        except (ValueError, TypeError, SyntaxError, RecursionError):
            continue
        return True
    return False


def _literal_checks(func: ast.AST) -> Iterator[tuple[ast.AST, bool]]:
    """Each check of a test function, and whether it compares with a literal expected value
    (one side a literal and the other not; ``pytest.approx(literal)``; a unittest assertion
    with a literal argument); nested functions and classes are not the test's own."""
    stack = list(ast.iter_child_nodes(func))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        stack.extend(ast.iter_child_nodes(node))
        if isinstance(node, ast.Assert):
            test = node.test
            literal = False
            if isinstance(test, ast.Compare) and len(test.ops) == 1:
                sides = [test.left, test.comparators[0]]
                approx = [s.args[0] for s in sides if isinstance(s, ast.Call) and s.args
                          and getattr(s.func, "attr", getattr(s.func, "id", "")) == "approx"]
                lits = [_literal_side([s]) for s in sides]
                literal = (lits[0] != lits[1]) or (bool(approx) and _literal_side(approx))
            yield node, literal
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr.startswith("assert") and isinstance(node.func.value, ast.Name) \
                and node.func.value.id == "self":
            args = node.args[:2]
            lits = [_literal_side([a]) for a in args]
            literal = node.func.attr in ("assertIsNone", "assertIsNotNone") or \
                (len(lits) == 2 and lits[0] != lits[1])
            yield node, literal


def _kind(node: ast.AST, func: ast.AST, keep: Iterable[str] = ()) -> str:
    """Why a literal check stays in the file: where it sits in the test, or that the task's
    record keeps it (``keep``: its value is no plain data)."""
    if keep and set(keep) & {ast.unparse(n) for n in ast.walk(node) if isinstance(n, ast.expr)}:
        return "value no plain data"
    parents = {id(c): p for p in ast.walk(func) for c in ast.iter_child_nodes(p)}
    at = parents.get(id(node))
    while at is not None and at is not func:
        if isinstance(at, (ast.For, ast.AsyncFor, ast.While, ast.comprehension)):
            return "in a loop"
        if isinstance(at, ast.If) and not at.orelse:
            return "in an if without else"
        if isinstance(at, (ast.If, ast.IfExp)):
            return "in a branch"
        if isinstance(at, (ast.Try, ast.ExceptHandler)):
            return "in a try"
        if isinstance(at, (ast.With, ast.AsyncWith)) and any(
                getattr(getattr(w.context_expr, "func", w.context_expr), "attr", "") in
                ("raises", "warns", "assertRaises", "assertRaisesRegex") for w in at.items):
            return "in a pytest.raises block"
        at = parents.get(id(at))
    return "other form"


def withheld_of(env: str, tasks: Iterable[tuple]) -> Withheld:
    """Count over ``(hidden files, test ids[, unwithheld])`` per task (``unwithheld``: test id ->
    the checks the task's record keeps as asserts, its values being no plain data)."""
    from proofgym.verify.sandboxed.mutants import list_tests
    from proofgym.verify.sandboxed.withheld import checks_of, withhold_source
    out = Withheld(env)
    for hidden, test_ids, *rest in tasks:
        keep = rest[0] if rest else {}
        out.tasks += 1
        wanted = set(test_ids)
        for path, source in hidden.items():
            if not path.endswith(".py"):
                continue
            tree = ast.parse(source)
            for item in list_tests(path, source):
                if item.node_id not in wanted or item.imported:
                    continue
                body = tree.body
                if item.cls is not None:
                    body = next(n.body for n in body if isinstance(n, ast.ClassDef) and n.name == item.cls)
                func = next(n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                            and n.name == item.name)
                checks = list(_literal_checks(func))
                lines = {e.line for e in checks_of(withhold_source(
                    source, item.name, item.cls, keep.get(item.node_id, ()))[1])}
                out.asserts += len(checks)
                out.literal += sum(lit for _, lit in checks)
                out.withheld += sum(lit and n.lineno in lines for n, lit in checks)
                out.kept.update(_kind(n, func, keep.get(item.node_id, ())) for n, lit in checks
                                if lit and n.lineno not in lines)
    return out


def _code_repair_withheld() -> Withheld:
    from proofgym.envs.code_repair import code_repair_tasks
    return withheld_of("CodeRepair", ((t.hidden_files, t.test_ids) for t in code_repair_tasks()))


def _repo_repair_withheld(fixtures: bool) -> tuple[Withheld, int]:
    """RepoRepair over the records whose project's sdist is cached; also how many records were
    left out (sdist not cached)."""
    import shutil
    import tempfile

    if fixtures:
        cache = Path(tempfile.mkdtemp(prefix="proofgym-withheld-"))
        os.environ["PROOFGYM_CACHE"] = str(cache)
        (cache / "sdists").mkdir(parents=True)
        for sdist in (Path(__file__).resolve().parents[1] / "tests/envs/fixtures/sdists").glob("*.tar.gz"):
            shutil.copy(sdist, cache / "sdists" / sdist.name)
    from proofgym.envs.repo_repair import MANIFEST, RECIPE, RepoRepairTask
    from proofgym.tasks.synth import Recipe, cache_dir, read_manifest
    recipe = Recipe.load(RECIPE)
    store = cache_dir() / "sdists"
    records = read_manifest(MANIFEST)
    cached = {p.name for p in recipe.projects if any(store.glob(f"{p.sha256}-*"))}
    use = [r for r in records if r.project in cached]

    def tasks():
        for record in use:
            inner = RepoRepairTask(record, recipe.pin_of(record)).inner
            yield inner.hidden_files, inner.test_ids, record.unwithheld

    try:
        return withheld_of("RepoRepair", tasks()), len(records) - len(use)
    finally:
        if fixtures:
            shutil.rmtree(os.environ["PROOFGYM_CACHE"], ignore_errors=True)


def report_withheld(rows: list[tuple[Withheld, int]], out=sys.stdout) -> None:
    print(f"{'env':12} {'tasks':>5} {'asserts':>7} {'literal':>7} {'withheld':>8} {'share':>6}  "
          "literal checks kept in the file, by where they are", file=out)
    for w, skipped in rows:
        kept = ", ".join(f"{k}: {n}" for k, n in sorted(w.kept.items())) or "none"
        note = f" ({skipped} tasks not cached)" if skipped else ""
        print(f"{w.env:12} {w.tasks:>5} {w.asserts:>7} {w.literal:>7} {w.withheld:>8} "
              f"{w.share:>6.1%}  {kept}{note}", file=out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", help="import proofgym from this checkout (default: this one)")
    parser.add_argument("--layouts", type=int, default=100, help="seeded layouts per task")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--withheld", action="store_true",
                        help="print the share of hidden literal expected values withheld, per env")
    parser.add_argument("--repo-repair-fixtures", action="store_true",
                        help="RepoRepair from the test suite's fixture sdists (offline)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(args.root).resolve() if args.root else Path(__file__).resolve().parents[1]))
    if not args.withheld:
        report(evaluate(args.layouts, args.seed))
    report_withheld([(_code_repair_withheld(), 0), _repo_repair_withheld(args.repo_repair_fixtures)])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
