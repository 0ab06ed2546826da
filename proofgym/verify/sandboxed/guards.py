"""Which tests a grading would guard, known from their source before any run.

A test is *guarded* when a forced pass of it is caught: it has a mutant
(:mod:`proofgym.verify.sandboxed.mutants`) or at least one withheld check
(:mod:`proofgym.verify.sandboxed.withheld`: the host compares a value the test process must send
and never sees the literal of). A task none of whose tests is guarded is a grader error
(``TestRun.guarded``), so synthesis asks this first: a project none of whose tests is guarded
gives no task, and a candidate bug that fails only unguarded tests is not worth a grading.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from proofgym.verify.sandboxed.mutants import Layout, build_layout
from proofgym.verify.sandboxed.withheld import withhold_layout

__all__ = ["guarded_tests", "one_case_view"]


def one_case_view(layout: Layout) -> Layout:
    """``layout`` without its parametrized tests, sharing its files (what is rewritten in the
    view is rewritten in ``layout``): what may be withheld, as a parametrized test's process
    runs each of its checks once per case."""
    several = set(layout.several)
    if not several:
        return layout
    return Layout(files=layout.files, run=[g for g in layout.run if g not in several],
                  real=layout.real, mutant=layout.mutant)


def guarded_tests(sources: Mapping[str, bytes], tests: Sequence[str], *,
                  first: bool = False) -> set[str]:
    """The ``tests`` (ids in ``sources``' files) that get a mutant or a withheld check when
    their file is hidden and graded with the file's other ``tests`` (a mutant may borrow from
    those), one file at a time; a mutant's draw may differ with a grading's seed, whether one
    exists rarely does, and the synthesis gate grades for real. With ``first``, stop after the
    first file (the smallest first: a layout isolates each test from a copy of its whole module,
    so a large generated file costs minutes) that has a guarded test: enough to know a project
    can give a task, at the cost of a file or two where it can."""
    by_file: dict[str, list[str]] = {}
    for test in dict.fromkeys(tests):
        by_file.setdefault(test.split("::", 1)[0], []).append(test)
    order = sorted(by_file)
    random.Random(0).shuffle(order)
    if first:
        order.sort(key=lambda path: len(sources[path]))
    out: set[str] = set()
    for path in order:
        layout = build_layout({path: sources[path]}, by_file[path], rng=random.Random(0),
                              mutate_files=[path])
        out.update(layout.mutant.values())
        withheld = withhold_layout(one_case_view(layout), [path])
        out.update(layout.real[g] for g in withheld if g in layout.real)
        if first and out:
            break
    return out
