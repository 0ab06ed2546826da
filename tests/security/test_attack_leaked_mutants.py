"""Attack: read the hidden tests of many gradings through a channel, keep what recurs.

Concurrent sandboxes share a kernel, and some of its state carries a few bits from one to
another (docs/threat-model.md, "Between concurrent episodes"). The red team's leak decoded the
tests of each grading of a task while the agent ran, and kept the version that recurred across
18 gradings: mutants were drawn anew for every grading, the real expected values were the same
every time, so frequency told them apart and the hard-coded real values scored 1.0 with the bug
unfixed. Every grading of a task must show the same mutants (names and order are drawn anew),
so a leak yields the same unlabelled pair each time and nothing recurs that the mutant lacks.
"""

from __future__ import annotations

import ast
import random

from proofgym.envs.code_repair import code_repair_tasks
from proofgym.verify.sandboxed import mutant_seed_of
from proofgym.verify.sandboxed import test_sources as sources_of
from proofgym.verify.sandboxed.mutants import build_layout


def _bodies(layout) -> dict[str, tuple[str, str]]:
    """Real test id -> (the real test's body, its mutant's body), names left out."""
    def body(path: str) -> str:
        module = ast.parse(layout.files[path])
        funcs = [n for n in ast.walk(module) if isinstance(n, ast.FunctionDef)
                 and n.name.startswith("test")]
        return "\n".join(ast.dump(stmt) for f in funcs for stmt in f.body)

    out: dict[str, list[str]] = {}
    for gen, real in layout.real.items():
        out.setdefault(real, ["", ""])[0] = body(gen.split("::", 1)[0])
    for gen, real in layout.mutant.items():
        out.setdefault(real, ["", ""])[1] = body(gen.split("::", 1)[0])
    return {k: (v[0], v[1]) for k, v in out.items()}


def test_every_grading_of_a_task_draws_the_same_mutants():
    tasks = list(code_repair_tasks())[:6]
    for task in tasks:
        hidden = task.hidden_files
        sources = sources_of(task.repo, {}, hidden, sorted({t.split("::", 1)[0]
                                                              for t in task.test_ids}))
        wanted = [t for t in task.test_ids if "::" in t] or None
        if wanted is None:
            continue
        seen = [_bodies(build_layout(sources, wanted, rng=random.Random(trial),
                                     mutate_files=list(hidden), mutant_seed=mutant_seed_of(hidden)))
                for trial in range(4)]
        mutated = {real for real, (_, mutant) in seen[0].items() if mutant}
        assert mutated, f"{task.id}: no mutant to compare"
        for later in seen[1:]:
            assert later == seen[0], f"{task.id}: a grading drew other mutants than the first"
        # the layouts themselves differ (names and order), so only the values are fixed
        layouts = {tuple(build_layout(sources, wanted, rng=random.Random(t), mutate_files=list(hidden),
                                      mutant_seed=mutant_seed_of(hidden)).run) for t in range(3)}
        assert len(layouts) > 1, task.id


def test_without_the_seed_the_mutants_change_between_gradings():
    """The positive control: drawn anew each time (as before the fix), mutants differ."""
    task = next(t for t in code_repair_tasks() if t.hidden_files)
    hidden = task.hidden_files
    sources = sources_of(task.repo, {}, hidden, sorted({t.split("::", 1)[0] for t in task.test_ids}))
    wanted = [t for t in task.test_ids if "::" in t]
    drawn = [_bodies(build_layout(sources, wanted, rng=random.Random(trial), mutate_files=list(hidden)))
             for trial in range(6)]
    assert any(d != drawn[0] for d in drawn[1:]), "mutants drawn without a seed never changed"
