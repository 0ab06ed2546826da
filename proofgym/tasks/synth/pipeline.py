"""Synthesising tasks for one project: baseline, candidate bugs, screening, validation.

1. The suite runs three times in a sandbox (the first traced: which project functions each test
   calls); only tests that pass in all three runs are kept (the restored original passes 3 of 3).
2. Every operator site in a function that some stable test calls, and that nothing calls at
   import or collection time, is a candidate; a seeded shuffle picks the ones tried.
3. **Test selection**: a candidate runs only the stable tests that called its function, plus
   three others drawn by the seed (a mutation inside a function body cannot change a test that
   never calls it). Candidates run in batches, each in a forked process of one sandbox.
4. A candidate is kept when 1-5 tests go from pass to fail, at least one selected test still
   passes, its diff is new and fewer than ``max_per_failing_set`` kept tasks break the same
   tests; then the real grader must score the bug 0 and the original 1 (``validate``, supplied
   by the caller).
5. Tier 2 combines 2-3 kept bugs in different functions of one module (one feature, so that one
   report describes them all); the combination goes through 3-4 again.
6. A candidate whose failure is a ``NameError``/``UnboundLocalError`` of a name the patch removed
   is rejected (the message points at the deleted line); the bug report comes from the
   ``writer`` (:mod:`proofgym.tasks.synth.statements`; offline by default), recorded in the
   record's ``provenance``.
"""

from __future__ import annotations

import itertools
import os
import random
import sys
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from proofgym.core.errors import SuiteRunError
from proofgym.tasks.synth.discover import (
    list_parametrized,
    list_test_files,
    list_test_functions,
    source_files,
)
from proofgym.tasks.synth.images import project_image
from proofgym.tasks.synth.manifest import TaskRecord, pristine_tree, task_id
from proofgym.tasks.synth.operators import Site, apply_site, sites
from proofgym.tasks.synth.patch import make_patch
from proofgym.tasks.synth.recipe import ProjectPin
from proofgym.tasks.synth.release_names import orphaned_names
from proofgym.tasks.synth.statements import BugEvidence, OfflineWriter, StatementWriter, failures_of
from proofgym.tasks.synth.tells import names_a_removed_name
from proofgym.tasks.synth.testrun import SuiteRun, SuiteRunner

MAX_FAILING = 5
BATCH = 16
#: Real-grader checks run at once (each is a sandbox; the gate is most of a project's time).
WORKERS = 2
OTHERS = 3

#: validate(record) -> (ok, problem, timings such as ``grading_s``[, the record's ``unwithheld``
#: list, as its reference run found it]): the real grader's verdicts.
Validator = Callable[[TaskRecord], tuple]

#: How a validator's problem begins for a task whose hidden tests the grader cannot guard (no
#: mutant, no withheld check: :func:`proofgym.envs.repo_repair.check_record`): that task is
#: ``unguarded``, not one where the grader disagrees with the screening.
UNGUARDED = "no hidden test has a mutant or a withheld check"


def rejection(problem: str | None) -> str:
    """The report's reason for a task the real-grader gate refused, from its problem."""
    return "unguarded" if (problem or "").startswith(UNGUARDED) else "grader_disagrees"


class Guard(Protocol):
    """``guard(test sources, test ids, first=...)`` -> the ids a grading would guard with a
    mutant or a withheld check (``proofgym.verify.sandboxed.guarded_tests``; ``first``: stop at
    the first file that has one): a task none of whose tests is guarded is a grader error."""

    def __call__(self, sources: Mapping[str, bytes], tests: Sequence[str], *,
                 first: bool = False) -> set[str]: ...


@dataclass
class Candidate:
    sites: tuple[tuple[str, Site], ...]  # (file, site) per bug
    changes: dict[str, tuple[bytes, bytes]]  # file -> (original, mutated)
    tests: list[str]  # the selected tests
    keys: frozenset[str]


@dataclass
class ProjectReport:
    project: str
    stable_tests: int = 0
    sites: int = 0
    tried: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    records: list[TaskRecord] = field(default_factory=list)
    seconds: float = 0.0
    screen_seconds: float = 0.0
    grading_seconds: list[float] = field(default_factory=list)
    grading_cpu: list[float] = field(default_factory=list)
    load: list[float] = field(default_factory=list)
    #: why the project gives no task, said before any screening (``None``: it was screened)
    refused: str | None = None

    def reject(self, why: str) -> None:
        self.rejected[why] = self.rejected.get(why, 0) + 1

    def to_dict(self) -> dict[str, object]:
        return {"project": self.project, "stable_tests": self.stable_tests, "sites": self.sites,
                "tried": self.tried, "kept": len(self.records), "rejected": dict(self.rejected),
                "seconds": round(self.seconds, 1), "screen_seconds": round(self.screen_seconds, 1),
                "grading_seconds": [round(s, 2) for s in self.grading_seconds],
                "grading_cpu_seconds": [round(s, 2) for s in self.grading_cpu],
                "load": [round(x, 2) for x in self.load], "refused": self.refused}


def _say(message: str, quiet: bool) -> None:
    if not quiet:
        sys.stderr.write(f"proofgym synth: {message}\n")
        sys.stderr.flush()


class ProjectSynth:
    """The synthesis of one pinned project (see the module docstring)."""

    def __init__(self, pin: ProjectPin, *, validate: Validator | None = None,
                 quiet: bool = False, writer: StatementWriter | None = None,
                 guard: Guard | None = None) -> None:
        self.pin = pin
        self.guard = guard
        self.guarded: dict[str, set[str]] = {}  # test file -> its guarded stable tests
        self.writer = writer or OfflineWriter()
        self.validate = validate
        self.quiet = quiet
        self.top = pristine_tree(pin, quiet=quiet)
        self.report = ProjectReport(pin.name)
        self.rng = random.Random(f"{pin.name}:{pin.version}:{pin.seed}")
        self.image = project_image(pin)
        self.seen: set[str] = set()
        self.per_failing: dict[frozenset[str], int] = {}

    def run(self, *, max_tasks: int | None = None, time_budget_s: float | None = None) -> ProjectReport:
        t0 = time.perf_counter()
        limit = self.pin.max_tasks if max_tasks is None else max_tasks
        self._list()
        refused = self._refusal(self.listed, "test function", "pytest's rules, read from the test files")
        if refused is not None:
            return self._refuse(refused, t0)
        self.pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="synth-grade")
        with self.pool, SuiteRunner(self.top, test_roots=self.pin.tests,
                         python_path=self.pin.python_path, image=self.image) as runner:
            self._baseline(runner)
            refused = self._refusal(self.stable, "stable test", "one that passes in 3 of 3 runs")
            if refused is not None:
                return self._refuse(refused, t0)
            candidates = self._candidates()
            _say(f"{self.pin.name}: {self.report.stable_tests} stable tests, "
                 f"{self.report.sites} sites, trying up to {len(candidates)}", self.quiet)
            # the budget counts from here: the baseline of a large suite takes what it takes
            deadline = time.perf_counter() + time_budget_s if time_budget_s else None
            tier1: list[tuple[TaskRecord, Candidate]] = []
            for start in range(0, len(candidates), BATCH):
                if len(tier1) >= limit or (deadline and time.perf_counter() > deadline):
                    break
                room = limit - len(tier1)
                batch = self._build(candidates[start:start + BATCH])
                for record, cand in self._screen(runner, batch, 1, room):
                    tier1.append((record, cand))
                    self.report.records.append(record)
            # tier 2 gets a fifth of the budget of its own, even when tier 1 used all of its
            extra = deadline and max(deadline, time.perf_counter() + 0.2 * (time_budget_s or 0))
            self._tier2(runner, tier1, extra)
        self.report.seconds = time.perf_counter() - t0
        _say(f"{self.pin.name}: kept {len(self.report.records)} of {self.report.tried} candidates "
             f"in {self.report.seconds:.0f} s; rejected {self.report.rejected}", self.quiet)
        return self.report

    # ------------------------------------------------------------------ stages
    def _list(self) -> None:
        self.files = list_test_files(self.top, self.pin.tests)
        self.sources = {f: (self.top / f).read_bytes() for f in self.files}
        self.listed = [t for f in self.files for t in list_test_functions(f, self.sources[f])]

    def _refusal(self, tests: Sequence[str], kind: str, how: str) -> str | None:
        """Why ``tests`` can give no task (none, as ``how`` found them; none that a grading would
        guard), or ``None``."""
        if not tests:
            return f"no {kind} ({how})"
        if self.guard is not None and not self.guard(self.sources, tests, first=True):
            return (f"no {kind} has a mutable or withholdable check (an assert or "
                    "self.assert* comparing with an expected value, a pytest.raises, a truth "
                    "check of a function another test checks the other way)")
        return None

    def _refuse(self, why: str, t0: float) -> ProjectReport:
        self.report.refused = why
        self.report.seconds = time.perf_counter() - t0
        _say(f"{self.pin.name}: gives no tasks: {why}", self.quiet)
        return self.report

    def _is_guarded(self, test: str) -> bool:
        """Whether a grading would guard ``test`` (computed per file, with the file's stable
        tests, on first use); every test is, without a ``guard``."""
        if self.guard is None:
            return True
        path = test.split("::", 1)[0]
        if path not in self.guarded:
            self.guarded[path] = self.guard(
                self.sources, [t for t in self.stable if t.split("::", 1)[0] == path])
        return test in self.guarded[path]

    def _baseline(self, runner: SuiteRunner) -> None:
        listed = self.listed
        first = runner.run(trace=True)
        again = runner.run_many([({}, None), ({}, None)])
        runs = [first, *again]
        if any(r is None for r in runs):
            raise SuiteRunError(f"{self.pin.name}: a baseline run of the suite did not finish")
        self.base_s = max(r.seconds for r in runs if r is not None)
        # a parametrized test runs all its cases in one grading process; a test pytest runs as
        # several items for another reason (a parametrized fixture) is not one the grader runs
        several = {t for f in self.files for t in list_parametrized(f, self.sources[f])}
        deselect = set(self.pin.deselect) | (first.parametrized - several)
        self.stable = sorted(t for t in listed if t not in deselect and all(
            r is not None and r.results.get(t) is not None and r.results[t].outcome == "passed"
            for r in runs))
        self.report.stable_tests = len(self.stable)
        stable = set(self.stable)
        self.callers: dict[str, set[str]] = {}
        for test, keys in first.calls.items():
            if test in stable:
                for key in keys:
                    self.callers.setdefault(key, set()).add(test)
        self.at_import = first.collect

    def _candidates(self) -> list[tuple[str, Site, str]]:
        """(file, site, function key) of the candidates to try, in the seeded order."""
        out = []
        for path in source_files(self.top, self.pin.source, self.pin.tests):
            source = (self.top / path).read_bytes()
            try:
                found = sites(source)
            except SyntaxError:
                continue
            for site in found:
                key = f"{path}:{site.first_line}:{site.function}"
                if key in self.at_import or key not in self.callers:
                    continue
                out.append((path, site, key))
        self.report.sites = len(out)
        self.rng.shuffle(out)
        return out[:self.pin.max_candidates]

    def _build(self, specs: Sequence[tuple[str, Site, str]]) -> list[Candidate]:
        """The mutants of ``specs`` (built a batch at a time: parsing a large module for each
        candidate up front would cost minutes)."""
        cands = []
        for path, site, key in specs:
            original = (self.top / path).read_bytes()
            mutated = apply_site(original, site)
            if mutated is None:
                self.report.reject("invalid_mutant")
                continue
            # a dropped `x = ...` whose `x` is still read: a NameError no release could ship,
            # even where a broad except turns it into another failure (python-json-logger's
            # formatStack gave a JSONDecodeError); only a drop can unbind a name
            if site.operator.startswith("drop_") and orphaned_names(original, mutated, path):
                self.report.reject("orphaned_name")
                continue
            cands.append(Candidate(((path, site),), {path: (original, mutated)},
                                   self._select({key}), frozenset({key})))
        return cands

    def _select(self, keys: set[str]) -> list[str]:
        chosen = sorted({t for k in keys for t in self.callers.get(k, ())})
        others = [t for t in self.stable if t not in set(chosen)]
        pick = random.Random(f"{self.pin.seed}:{sorted(keys)}").sample(others, min(OTHERS, len(others)))
        return sorted({*chosen, *pick})

    def _screen(self, runner: SuiteRunner, batch: Sequence[Candidate], tier: int, room: int):
        """Run a batch, judge each candidate and yield at most ``room`` valid ones (those after
        that are neither judged nor counted as tried)."""
        fresh = []
        for cand in batch:
            patch = make_patch(cand.changes)
            if patch in self.seen:
                self.report.reject("duplicate_diff")
                continue
            self.seen.add(patch)
            fresh.append((cand, patch))
        if not fresh:
            return
        t0 = time.perf_counter()
        # watching the bugs' functions: how each failing test reached one names the API its
        # report describes (statements.OfflineWriter)
        runs = runner.run_many([({p: new for p, (_, new) in c.changes.items()}, c.tests)
                                for c, _ in fresh], timeout_s=max(20.0, 5 * self.base_s),
                               watch=[[(path, site.function, site.line) for path, site in c.sites]
                                      for c, _ in fresh])
        self.report.screen_seconds += time.perf_counter() - t0
        self.report.load.append(os.getloadavg()[0])
        inflight: deque[tuple[Candidate, TaskRecord, Future]] = deque()
        accepted = 0
        for (cand, patch), run in zip(fresh, runs, strict=True):
            # at most WORKERS gradings in flight, and never more than the room left
            while inflight and (len(inflight) >= WORKERS or accepted + len(inflight) >= room):
                done = self._finish(*inflight.popleft())
                if done is not None:
                    accepted += 1
                    yield done
            if accepted >= room:
                self.seen.discard(patch)  # not judged: free for a later batch
                continue
            self.report.tried += 1
            why, record = self._judge(cand, patch, run, tier)
            if why is not None:
                self.report.reject(why)
                continue
            assert record is not None
            if self.validate is None:
                self.per_failing[frozenset(record.fail_to_pass)] = \
                    self.per_failing.get(frozenset(record.fail_to_pass), 0) + 1
                accepted += 1
                yield record, cand
                continue
            inflight.append((cand, record, self.pool.submit(self.validate, record)))
        while inflight:
            done = self._finish(*inflight.popleft())
            if done is not None and accepted < room:
                accepted += 1
                yield done

    def _finish(self, cand: Candidate, record: TaskRecord,
                future: Future) -> tuple[TaskRecord, Candidate] | None:
        ok, problem, timings, *found = future.result()
        self.report.grading_seconds.append(float(timings.get("grading_s", 0.0)))
        if "grading_cpu_s" in timings:
            self.report.grading_cpu.append(float(timings["grading_cpu_s"]))
        if not ok:
            _say(f"{record.id}: rejected by the grader: {problem}", self.quiet)
            self.report.reject(rejection(problem))
            return None
        same = frozenset(record.fail_to_pass)
        if self.per_failing.get(same, 0) >= self.pin.max_per_failing_set:  # filled meanwhile
            self.report.reject("same_failing_tests_as_others")
            return None
        self.per_failing[same] = self.per_failing.get(same, 0) + 1
        stats = {**record.stats, **{k: round(float(v), 3) for k, v in timings.items()}}
        return TaskRecord(**{**record.__dict__, "stats": stats,
                             "unwithheld": found[0] if found else record.unwithheld}), cand

    def _judge(self, cand: Candidate, patch: str, run: SuiteRun | None,
               tier: int) -> tuple[str | None, TaskRecord | None]:
        if run is None:
            return "timeout_or_crash", None
        outcomes = {t: run.results.get(t) for t in cand.tests}
        failing = {t: o for t, o in outcomes.items() if o is None or o.outcome != "passed"}
        if not failing:
            return "no_test_fails", None
        if len(failing) > MAX_FAILING:
            return "too_many_fail", None
        if any(o is None or o.outcome not in ("failed", "error") for o in failing.values()):
            return "test_not_run_or_skipped", None
        if len(failing) == len(outcomes):
            return "no_test_still_passes", None
        same = frozenset(failing)
        if self.per_failing.get(same, 0) >= self.pin.max_per_failing_set:
            return "same_failing_tests_as_others", None
        failures = failures_of(failing)
        if names_a_removed_name(patch, failures):
            # "name 'seen' is not defined": the failure points at the deleted line itself
            return "name_error_of_removed_name", None
        if not any(self._is_guarded(t) for t in failing):
            # a forced pass of these tests would go unnoticed: not worth a grading
            return "no_guarded_failing_test", None
        p2p = self._pass_to_pass(cand, set(failing))
        hidden_sources = [self.sources[f] for f in {t.split("::", 1)[0] for t in failing}]
        bugs = tuple({"file": path, "operator": site.operator, "index": site.index,
                      "function": site.function, "line": site.line} for path, site in cand.sites)
        statement = self.writer.write(BugEvidence(self.pin.name, patch, bugs, failures, len(p2p),
                                                  hidden_sources))
        record = TaskRecord(task_id(self.pin.name, patch), self.pin.name, self.pin.version, tier,
                            bugs, self.pin.seed, patch, tuple(sorted(failing)), tuple(p2p),
                            statement.title, statement.report,
                            stats={"screen_s": round(run.seconds, 3)},
                            provenance=statement.provenance)
        return None, record

    def _pass_to_pass(self, cand: Candidate, failing: set[str]) -> list[str]:
        """The whole stable suite less the failing tests, as SWE-bench checks a fix (the gate,
        :func:`~proofgym.envs.repo_repair.check_record`, runs it all on the bug: a test the
        candidate broke without the screening's selection seeing it rejects the task)."""
        return [t for t in self.stable if t not in failing]

    def stable_suite(self) -> list[str]:
        """The project's stable tests (3 of 3 baseline runs pass), computed alone: what every
        task's pass-to-pass is made of (:class:`~proofgym.tasks.synth.manifest.StableSuite`)."""
        self._list()
        with SuiteRunner(self.top, test_roots=self.pin.tests, python_path=self.pin.python_path,
                         image=self.image) as runner:
            self._baseline(runner)
        return list(self.stable)

    def _tier2(self, runner: SuiteRunner, tier1: list[tuple[TaskRecord, Candidate]],
               deadline: float | None) -> None:
        if len(tier1) < 2 or self.pin.tier2 <= 0:
            return
        combos = []
        for _ in range(self.pin.tier2 * 3):
            k = self.rng.choice((2, 2, 3)) if len(tier1) >= 3 else 2
            parts = self.rng.sample(tier1, k)
            keys = [c.keys for _, c in parts]
            if len(frozenset().union(*keys)) < k:  # two bugs in one function: not independent
                continue
            if len({path for _, c in parts for path, _ in c.sites}) > 1:
                continue  # bugs of one feature (one module), so that one report describes both
            combined = _combine([c for _, c in parts])
            if combined is None:
                continue
            combined.tests = self._select(set(combined.keys))
            combos.append(combined)
        kept = 0
        for start in range(0, len(combos), BATCH):
            if kept >= self.pin.tier2 or (deadline and time.perf_counter() > deadline):
                break
            for record, _ in self._screen(runner, combos[start:start + BATCH], 2,
                                          self.pin.tier2 - kept):
                self.report.records.append(record)
                kept += 1


def _combine(parts: Sequence[Candidate]) -> Candidate | None:
    """One candidate applying every part's splices (each on the original file), or ``None``
    when two of them overlap."""
    by_file: dict[str, list[Site]] = {}
    originals: dict[str, bytes] = {}
    for cand in parts:
        for path, site in cand.sites:
            by_file.setdefault(path, []).append(site)
            originals[path] = cand.changes[path][0]
    changes = {}
    for path, file_sites in by_file.items():
        edits = sorted(e for s in file_sites for e in s.edits)
        if any(a[1] > b[0] for a, b in itertools.pairwise(edits)):
            return None
        merged = Site("combined", 0, "", 0, 0, tuple(edits))
        mutated = apply_site(originals[path], merged)
        if mutated is None:
            return None
        changes[path] = (originals[path], mutated)
    return Candidate(tuple(s for c in parts for s in c.sites), changes, [],
                     frozenset().union(*(c.keys for c in parts)))


def synthesize_project(pin: ProjectPin, *, validate: Validator | None = None, quiet: bool = False,
                       max_tasks: int | None = None, time_budget_s: float | None = None,
                       writer: StatementWriter | None = None,
                       guard: Guard | None = None) -> ProjectReport:
    """Synthesise tasks for ``pin`` (see the module docstring); ``validate`` is the real-grader
    check each kept candidate must pass (``None``: screening only); ``writer`` writes the bug
    reports (default: :class:`~proofgym.tasks.synth.statements.OfflineWriter`); with ``guard``
    a project none of whose tests a grading would guard is refused in one line before its
    baseline (or, none of its stable tests, after it), and a candidate none of whose failing
    tests is guarded is rejected without a grading."""
    return ProjectSynth(pin, validate=validate, quiet=quiet, writer=writer, guard=guard).run(
        max_tasks=max_tasks, time_budget_s=time_budget_s)


def checkout(pin: ProjectPin) -> Path:
    """The unpacked sdist of ``pin``."""
    return pristine_tree(pin, quiet=True)


__all__ = ["UNGUARDED", "Candidate", "Guard", "ProjectReport", "ProjectSynth", "Validator",
           "checkout", "rejection", "synthesize_project"]

