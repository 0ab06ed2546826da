"""Which withheld checks of a manifest's tasks the reference fix cannot send: computed once.

A hidden assert that compares a computed value with a literal is withheld
(:mod:`proofgym.verify.sandboxed.withheld`): the test process sends the value, the host compares.
Where the value is an object that is no plain data (hyperframe's ``Flags``, a set-like class
equal to a set literal; an enum; a class with its own ``__eq__``) the process cannot send it and
the check fails, even for the reference fix. Such checks stay asserts: a task lists them in its
record (``TaskRecord.unwithheld``), and the grader leaves them in the file, where mutants cover
them (``withhold_source``'s ``keep`` says why no sound comparison exists).

The list is found by the reference: for each project version of the manifest, one grading of a
task's reference fix (the pristine source, every task's reference at that version) with all its
tasks' fail-to-pass tests hidden; each test's checks that observed no plain data (``TestRun.unplain``) are the
list of every task that has that test. Run it where the records are made or changed::

    nice -n 19 python -m proofgym.envs.repo_repair.unwithheld MANIFEST [--project NAME ...] --write
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from proofgym.envs.repo_repair.task import RepoRepairTask
from proofgym.tasks.synth import Recipe, TaskRecord, read_manifest, write_manifest
from proofgym.verify.sandboxed import files_under, run_pytest

__all__ = ["find_unplain", "main", "with_unwithheld"]


def find_unplain(records: Iterable[TaskRecord], recipe: Recipe, *, cache_root: Path | None = None,
                 timeout_s: float = 900.0, log=None
                 ) -> tuple[dict[str, dict[str, tuple[str, ...]]], dict[str, str]]:
    """Task id -> fail-to-pass test id -> the checks (``Expectation.computed``) of that test whose
    value on the reference fix is no plain data (tasks with none left out); and project ->
    why its reference grading judged nothing (its tasks are not in the first)."""
    by_pin: dict[tuple[str, str], list[TaskRecord]] = {}
    for record in records:
        by_pin.setdefault((record.project, record.version), []).append(record)
    out: dict[str, dict[str, tuple[str, ...]]] = {}
    problems: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="proofgym-unwithheld-") as tmp:
        for (project, version), group in sorted(by_pin.items()):
            pin = recipe.pin_of(group[0])
            tests = tuple(sorted({t for r in group for t in r.fail_to_pass}))
            # the first task's bug, with every task's fail-to-pass tests hidden
            probe = TaskRecord(f"{project}-unplain-probe", project, version, 1, (), 0,
                               group[0].patch, tests, (), "", "")
            task = RepoRepairTask(probe, pin, cache_root=Path(cache_root or tmp))
            try:  # its reference fix: the pristine source, every task's reference
                inner = task.inner
                # no mutants: the probe's would be drawn for its own set of hidden tests, not a
                # task's, and a weak one that passes with its test only hides the observations
                run = run_pytest(inner.repo, files_under(task.root / "solution"),
                                 tests=inner.test_ids, hidden=inner.hidden_files,
                                 protected=inner.protected, timeout_s=timeout_s,
                                 test_timeout_s=60.0, image=task.image, mutants=False)
            except Exception as exc:  # reported with the project; the other projects go on
                problems[project] = f"{version}: {type(exc).__name__}: {exc}"
                continue
            if run.failure is not None or not run.results:
                problems[project] = f"{version}: {run.failure}: {run.report_error}"
                continue
            found = dict(run.unplain)
            if log is not None:
                log(f"{project} {version}: {len(tests)} tests, {len(found)} with checks of no "
                    f"plain data {sorted(found)}")
            for record in group:
                mine = {t: found[t] for t in record.fail_to_pass if t in found}
                if mine:
                    out[record.id] = mine
    return out, problems


def with_unwithheld(records: Sequence[TaskRecord], found: Mapping[str, Mapping[str, Sequence[str]]],
                    projects: Iterable[str] | None = None) -> list[TaskRecord]:
    """``records`` with ``unwithheld`` set from ``found`` (for the records of ``projects``, all
    when ``None``; the rest kept as they are)."""
    scope = None if projects is None else set(projects)
    return [r if scope is not None and r.project not in scope else
            replace(r, unwithheld={t: tuple(c) for t, c in sorted(found.get(r.id, {}).items())})
            for r in records]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m proofgym.envs.repo_repair.unwithheld",
                                     description=__doc__.split("\n", 1)[0])
    parser.add_argument("manifest", type=Path)
    parser.add_argument("--recipe", type=Path, default=None,
                        help="the recipe (default: the bundled RepoRepair recipe)")
    parser.add_argument("--project", action="append", default=None,
                        help="only the tasks of this project (repeatable)")
    parser.add_argument("--write", action="store_true", help="write the lists into the manifest")
    args = parser.parse_args(argv)
    from proofgym.envs.repo_repair import RECIPE

    recipe = Recipe.load(args.recipe or RECIPE)
    records = read_manifest(args.manifest)
    chosen = [r for r in records if args.project is None or r.project in args.project]
    found, problems = find_unplain(chosen, recipe,
                                   log=lambda m: print(m, file=sys.stderr, flush=True))
    for task_id, tests in sorted(found.items()):
        print(task_id, dict(tests))
    for project, why in sorted(problems.items()):
        print(f"not judged: {project} {why}", file=sys.stderr)
    done = {r.project for r in chosen} - set(problems)
    print(f"{len(found)} of {sum(r.project in done for r in chosen)} tasks of {len(done)} "
          "projects have checks of no plain data", file=sys.stderr)
    if args.write:  # the records of projects not judged stay as they were
        write_manifest(args.manifest, with_unwithheld(records, found, done))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
