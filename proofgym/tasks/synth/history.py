"""Real bugs from release history: a fix that release ``b`` made, reverted from ``b``.

For a pinned project (release ``b``) the index lists the release before it (``a``: the highest
earlier version with an sdist, not yanked, not a pre-release unless ``b`` is one). Then:

1. ``b``'s suite runs three times in a sandbox (the first traced); the tests that pass every time
   are its stable tests, as synthesis takes them (a parametrized test is one); for the pinned
   release, the manifest's stable suite (those of it that pass here too).
2. The source files both sdists have (under the pin's ``source``) are split into hunks
   (:mod:`.hunks`); "``a``'s source" is ``b`` with every hunk reverted (files only ``b`` has stay,
   so a new module ``b``'s own code imports does not fail everything; modules only ``a`` has are
   added, as ``a``'s code imports them).
3. The stable tests that fail there for a behavioural reason are the candidates: a failure on a
   name ``a`` does not have (``cannot import name``, ``has no attribute``, ``is not defined``,
   ``No module named``, ``unexpected keyword argument``) is an API change, not a bug.
4. Per candidate (at most :data:`MAX_TARGETS`; one that a fix already found explains is
   skipped), :func:`.hunks.ddmin` finds a 1-minimal set of hunks whose reversion from ``b``
   still makes it fail behaviourally (first among the hunks of the files the test called into,
   then among all). That set is the fix; candidates it already explains share it.
5. Per fix, ``b`` with the fix reverted runs the whole stable suite: the tests that fail are the
   fail-to-pass tests (each behavioural, at most :data:`MAX_FAILING`), every other stable test is
   pass-to-pass. The record's patch is the reversion (applied to ``b``, the pinned sdist, it gives
   the buggy tree); its origin is ``release a->b``; the real grader gates it as for synthetic
   bugs (``validate``).

The bug report is the project's own changelog entry when one matches the fix
(:mod:`.changelog`), marked ``provenance["statement"]["writer"] == "changelog"``; else the
written statement of :func:`written_statement`.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from proofgym.core.errors import HistoryError as HistoryError
from proofgym.tasks.synth.changelog import best_entry, release_entries, words
from proofgym.tasks.synth.discover import (
    list_parametrized,
    list_test_files,
    list_test_functions,
    source_files,
)
from proofgym.tasks.synth.fetch import FetchError, Release, cache_dir, fetch_sdist, index_releases, unpack
from proofgym.tasks.synth.hunks import Hunk, ddmin, revert, split_hunks
from proofgym.tasks.synth.images import project_image
from proofgym.tasks.synth.manifest import TaskRecord, pristine_tree, task_id
from proofgym.tasks.synth.patch import make_patch
from proofgym.tasks.synth.pipeline import Validator, rejection
from proofgym.tasks.synth.recipe import ProjectPin
from proofgym.tasks.synth.release_names import (
    behavioural,
    counterpart,
    enclosing,
    identifiers,
    missing_name,
    orphaned_names,
    reverts_an_import,
)
from proofgym.tasks.synth.statements import (
    BugEvidence,
    OfflineWriter,
    StatementWriter,
    failures_of,
    only_names_and_exceptions,
)
from proofgym.tasks.synth.testrun import SuiteRun, SuiteRunner, TestOutcome

#: fail-to-pass tests a real fix may have (a fix reverted that breaks more is a feature, not a bug)
MAX_FAILING = 10
#: candidates delta-debugged per release (each a ddmin of its own; a candidate a fix already found
#: explains costs none)
MAX_TARGETS = 12
#: hunks ddmin searches at most (a release rewriting more is a refactoring, not a fix)
MAX_HUNKS = 400
OPERATOR = "release_fix"
#: the least time a whole-suite run gets (else five times the suite's own time): a run past it,
#: a hanging test on a's code, is ``None``
RUN_TIMEOUT_S = 30.0

class _NoCandidate(HistoryError):
    """No test of b fails behaviourally on a's source (or none runs there)."""


def origin_of(before: str, after: str) -> str:
    return f"release {before}->{after}"


def previous_release(name: str, version: str) -> tuple[str, Release]:
    """The release just before ``name==version`` on the index that ships an sdist (not yanked;
    pre-releases only when ``version`` is one)."""
    ((_, _), before), = release_pairs(name, version, 1)
    return before


def release_pairs(name: str, version: str, count: int) -> list[tuple[tuple[str, Release | None],
                                                                     tuple[str, Release]]]:
    """Up to ``count`` consecutive release pairs of ``name`` walking back from ``version``:
    ``[((b, b's sdist), (a, a's sdist)), ...]`` where the first ``b`` is ``version`` (its sdist
    ``None`` when the index has none: the pin names it) and each later ``b`` is the ``a`` before
    it; ``a`` as :func:`previous_release` picks it. Fewer when the index runs out of releases."""
    try:
        target = Version(version)
    except InvalidVersion as exc:
        raise HistoryError(f"{version!r} is not a version the index orders") from exc
    listed = index_releases(name)
    earlier = []
    for raw, release in listed.items():
        try:
            v = Version(raw)
        except InvalidVersion:
            continue
        if release is None or release.yanked or v >= target or (v.is_prerelease
                                                                and not target.is_prerelease):
            continue
        earlier.append((v, raw, release))
    if not earlier:
        raise HistoryError(f"no earlier sdist: the index lists no release of {name} before "
                           f"{version} that ships one")
    earlier.sort(reverse=True)
    chain: list[tuple[str, Release | None]] = [(version, listed.get(version))]
    chain += [(raw, release) for _, raw, release in earlier[:count]]
    return [(chain[i], chain[i + 1]) for i in range(len(chain) - 1)]  # type: ignore[misc]


def written_statement(pin: ProjectPin, failing: Mapping[str, TestOutcome],
                      hidden_sources: Sequence[bytes], passing: int, *, patch: str = "",
                      bugs: Sequence[Mapping[str, Any]] = (),
                      writer: StatementWriter | None = None) -> tuple[str, str, dict[str, Any]]:
    """The written statement of a fix no changelog entry describes: (title, report, provenance),
    by ``writer`` (default :class:`~proofgym.tasks.synth.statements.OfflineWriter`), as for an
    operator's bug."""
    failures = failures_of(failing)
    statement = (writer or OfflineWriter()).write(
        BugEvidence(pin.name, patch, tuple(bugs), failures, passing, tuple(hidden_sources)))
    return statement.title, statement.report, dict(statement.provenance)


def changelog_statement(top: Path, pin: ProjectPin, fix: Sequence[Hunk], files: Mapping[str, bytes],
                        failing: Sequence[str]) -> tuple[str, str, dict[str, Any]] | None:
    """The project's own changelog entry for the fix, as (title, report, provenance), or ``None``
    when no entry of ``pin.version``'s section matches it confidently."""
    entries = release_entries(top, pin.version)
    if not entries:
        return None
    names = {enclosing(files[h.path], h.line) for h in fix} - {""}
    evidence = set()
    for hunk in fix:
        evidence |= words("".join(hunk.old + hunk.new))
    for node in failing:
        evidence |= words(node.rsplit("::", 1)[-1])
    entry = best_entry(entries, names, evidence)
    if entry is None:
        return None
    report = (f"# {entry.title}\n\n{entry.text}\n\n"
              f"(The changelog entry of {pin.name} {pin.version} for this fix, from `{entry.file}`.) "
              "The tests that check it are not in the repository; the remaining tests must keep "
              "passing. Fix the library code, not the tests.\n")
    return entry.title, report, {"statement": {"writer": "changelog", "file": entry.file,
                                               "version": pin.version}}


@dataclass
class HistoryReport:
    """What one project's release history gave: its records, or the one-line ``reason`` it gave
    none; ``rejected`` counts the fixes found but not kept, by reason."""

    project: str
    after: str
    before: str | None = None
    hunks: int = 0
    stable_tests: int = 0
    candidates: int = 0
    tried: int = 0
    test_runs: int = 0
    reason: str | None = None
    rejected: dict[str, int] = field(default_factory=dict)
    records: list[TaskRecord] = field(default_factory=list)
    seconds: float = 0.0

    def reject(self, why: str, count: int = 1) -> None:
        if count:
            self.rejected[why] = self.rejected.get(why, 0) + count

    def to_dict(self) -> dict[str, object]:
        return {"project": self.project, "origin": origin_of(self.before or "?", self.after),
                "hunks": self.hunks, "stable_tests": self.stable_tests,
                "candidates": self.candidates, "tried": self.tried, "kept": len(self.records),
                "test_runs": self.test_runs, "reason": self.reason, "rejected": dict(self.rejected),
                "seconds": round(self.seconds, 1)}


def _say(message: str, quiet: bool) -> None:
    if not quiet:
        sys.stderr.write(f"proofgym history: {message}\n")
        sys.stderr.flush()


class ReleaseHistory:
    """The release-history synthesis of one pinned project (see the module docstring).
    ``before`` gives release ``a`` (version, sdist) instead of asking the index."""

    def __init__(self, pin: ProjectPin, *, validate: Validator | None = None, quiet: bool = False,
                 before: tuple[str, Release] | None = None, suite: Sequence[str] | None = None) -> None:
        self.pin = pin
        self.suite = suite
        self.validate = validate
        self.quiet = quiet
        self.before = before
        self.report = HistoryReport(pin.name, pin.version)

    def run(self) -> HistoryReport:
        t0 = time.perf_counter()
        try:
            self._run()
        except HistoryError as exc:
            self.report.reason = str(exc)
        except FetchError as exc:
            self.report.reason = f"cannot fetch a release: {exc}"
        self.report.seconds = time.perf_counter() - t0
        if not self.report.records and self.report.reason is None:
            self.report.reason = ("no fix kept: " + ", ".join(f"{k} {v}" for k, v in
                                                              sorted(self.report.rejected.items())))
        _say(f"{self.pin.name}: {len(self.report.records)} tasks from "
             f"{origin_of(self.report.before or '?', self.pin.version)}"
             + (f"; {self.report.reason}" if self.report.reason else ""), self.quiet)
        return self.report

    def _run(self) -> None:
        pin = self.pin
        version, release = self.before or previous_release(pin.name, pin.version)
        self.report.before = version
        self.top = pristine_tree(pin, quiet=self.quiet)
        sdist = fetch_sdist(pin.name, version, release.sha256, release.url, quiet=self.quiet)
        old_top = unpack(sdist, cache_dir() / "src" / f"{pin.name}-{version}-{release.sha256[:12]}")
        try:
            paths = source_files(self.top, pin.source, pin.tests)
        except ValueError as exc:  # an earlier release of a walk back, laid out otherwise
            raise HistoryError(self._laid_out_otherwise(exc)) from exc
        self.files = {p: (self.top / p).read_bytes() for p in paths}
        common = {p: old for p in paths if (old := counterpart(old_top, p)) is not None}
        # a's own modules that b removed (funcy 1.18's compat.py): a's code imports them, so
        # every screened tree has them; a task's tree (b with its fix reverted) does not
        try:
            continued = set(common.values())
            self.removed = {p: (old_top / p).read_bytes()
                            for p in source_files(old_top, pin.source, pin.tests)
                            if p not in continued and not (self.top / p).exists()}
        except ValueError:
            self.removed = {}
        if not common:
            raise HistoryError(f"{version}'s sdist has none of {pin.version}'s source files at the "
                               "same paths (the layout changed)")
        hunks: list[Hunk] = []
        for path, old in common.items():
            try:
                hunks += split_hunks(path, (old_top / old).read_bytes(), self.files[path])
            except UnicodeDecodeError:
                continue
        self.report.hunks = len(hunks)
        if not hunks:
            raise HistoryError(f"no source change between {version} and {pin.version}")
        try:
            self.test_files = list_test_files(self.top, pin.tests)
        except ValueError as exc:  # first 2.0.1 ships no test_first.py
            raise HistoryError(self._laid_out_otherwise(exc)) from exc
        self.file_names = {p: identifiers(p, data) for p, data in self.files.items()}
        self.name_cache: dict[frozenset[Hunk], set[str]] = {}
        self.orphan_cache: dict[frozenset[Hunk], bool] = {}
        with SuiteRunner(self.top, test_roots=pin.tests, python_path=pin.python_path,
                         image=project_image(pin)) as runner:
            self.runner = runner
            self._baseline()
            targets = self._candidates(hunks, version)
            _say(f"{pin.name}: {len(hunks)} hunks from {version} to {pin.version}, "
                 f"{self.report.stable_tests} stable tests, {self.report.candidates} fail "
                 f"behaviourally on {version}'s source; delta debugging up to {MAX_TARGETS}", self.quiet)
            fixes: dict[frozenset[Hunk], list[str]] = {}
            for test in targets:
                if any(self._fails(fix, test) for fix in fixes):
                    continue  # a fix already found explains it
                if self.report.tried >= MAX_TARGETS:
                    break
                self.report.tried += 1
                fix = self._minimal_fix(test, self.pool)
                if fix is None:
                    self.report.reject("no_minimal_fix")
                    continue
                fixes.setdefault(frozenset(fix), []).append(test)
                _say(f"{test}: fixed by {len(fix)} of {len(hunks)} hunks "
                     f"({', '.join(f'{h.path}:{h.line}' for h in fix)})", self.quiet)
            for fix in fixes:
                self._task(sorted(fix), version)

    def _laid_out_otherwise(self, exc: Exception) -> str:
        return f"{self.pin.version}'s sdist is laid out otherwise than the recipe says ({exc})"

    # ------------------------------------------------------------------ stages
    def _baseline(self) -> None:
        pin = self.pin
        files = self.test_files
        self.test_sources = {f: (self.top / f).read_bytes() for f in files}
        listed = [t for f in files for t in list_test_functions(f, self.test_sources[f])]
        # a suite that does not finish in the sandbox (click 8.5.1's, a test waits on a
        # terminal) is this pair's reason, not an error that ends the walk of every project
        first = self.runner.run_many([({}, None)], trace=True)[0]
        if first is None:
            raise HistoryError(f"{pin.version}'s suite does not finish in the sandbox within "
                               f"{self.runner.timeout_s:g} s")
        # synthesis' own stable suite: passing in 3 of 3 runs (a given suite: checked once more)
        more = self.runner.run_many([({}, None)] * (1 if self.suite is not None else 2))
        self.report.test_runs += 1 + len(more)
        if any(r is None for r in more):
            raise HistoryError(f"{pin.version}'s suite does not finish in the sandbox")
        runs = [first, *more]
        self.base_s = max(r.seconds for r in runs if r is not None)
        # as synthesis: a parametrized test is one (the grader runs all its cases in one
        # process); a test pytest runs as several items for another reason is not one
        several = {t for f in files for t in list_parametrized(f, self.test_sources[f])}
        drop = set(pin.deselect) | (first.parametrized - several)
        self.stable = sorted(t for t in (self.suite if self.suite is not None else listed)
                             if t not in drop and all(r.results.get(t) is not None
                                                      and r.results[t].outcome == "passed"
                                                      for r in runs))
        self.report.stable_tests = len(self.stable)
        if not listed:
            raise HistoryError(f"no test the grader lists: {pin.version}'s test files have no test "
                               "function or Test* class method (unittest classes named otherwise "
                               "are not listed)")
        if not self.stable:
            raise HistoryError(f"no stable test: none of {pin.version}'s {len(listed)} listed tests "
                               "passes in every baseline run in the sandbox")
        self.touched = {t: {k.split(":", 1)[0] for k in keys} for t, keys in first.calls.items()}
        self.memo: dict[frozenset[Hunk], SuiteRun | None] = {}

    def _names(self, config: frozenset[Hunk]) -> set[str]:
        """The names the source of ``b`` with ``config`` reverted defines (or mentions)."""
        if config not in self.name_cache:
            changed = revert(self.files, config)
            self.name_cache[config] = set().union(
                *(identifiers(p, changed[p]) if p in changed else names
                  for p, names in self.file_names.items()))
        return self.name_cache[config]

    def _screened(self, config: frozenset[Hunk]) -> dict[str, bytes]:
        """The files a screening run changes: ``config`` reverted, and a's removed modules."""
        return {**self.removed, **revert(self.files, config)}

    def _behavioural(self, config: frozenset[Hunk], run: SuiteRun | None, test: str) -> bool:
        return (run is not None and behavioural(run.results.get(test), self._names(config))
                and not self._orphans(config))

    def _orphans(self, config: frozenset[Hunk]) -> bool:
        """Whether reverting ``config`` leaves a name read but no longer defined."""
        if config not in self.orphan_cache:
            changed = revert(self.files, config)
            self.orphan_cache[config] = any(orphaned_names(self.files[p], changed[p], p)
                                            for p in changed)
        return self.orphan_cache[config]

    def _candidates(self, hunks: list[Hunk], version: str) -> list[str]:
        """The candidates on a's source, and the hunks delta debugging searches (``pool``). When
        no test fails behaviourally there, a's source is taken with b's imports kept: a module
        a imported that the sandbox lacks or b dropped (isodate 0.6.1's ``six``, munch 3.0.0's
        ``python3_compat``) fails every test on its import, hiding every fix of the release."""
        self.pool = hunks
        try:
            return self._screen(frozenset(hunks), version)
        except _NoCandidate as exc:
            kept = [h for h in hunks if not reverts_an_import(h)]
            if not kept or len(kept) == len(hunks):
                raise
            self.pool = kept
            try:
                return self._screen(frozenset(kept), version)
            except _NoCandidate:
                raise exc from None

    def _screen(self, hunks: frozenset[Hunk], version: str) -> list[str]:
        # the whole roots, not test ids: pytest runs no id at all when one id's file fails to
        # import, as a test file importing a name of b's does on a's source
        changed, timeout = self._screened(hunks), max(RUN_TIMEOUT_S, 5 * self.base_s)
        on_a = self.runner.run_many([(changed, None)], timeout_s=timeout)[0]
        self.report.test_runs += 1
        if on_a is None:
            # one test file that hangs on a's code (a loop the release ended: cachetools 8.0.1's
            # iteration while updating) takes the whole run with it: each file alone, so the
            # others' tests still count (a hanging file's are no candidates)
            files = sorted({t.split("::", 1)[0] for t in self.stable})
            runs = self.runner.run_many([(changed, [f]) for f in files], timeout_s=timeout)
            self.report.test_runs += len(files)
            if all(r is None for r in runs):
                raise _NoCandidate(f"{self.pin.version}'s tests do not run on {version}'s source "
                                   "(the run crashed or timed out, each test file alone too)")
            on_a = SuiteRun({t: o for r in runs if r is not None for t, o in r.results.items()},
                            seconds=max(r.seconds for r in runs if r is not None))
            self.report.reject("test_file_hangs_on_a", sum(r is None for r in runs))
        failing = [t for t in self.stable if on_a.results.get(t) is None
                   or on_a.results[t].outcome != "passed"]
        if not failing:
            raise HistoryError(f"every stable test of {self.pin.version} passes on {version}'s "
                               "source: no fix its tests see")
        found = [t for t in failing if self._behavioural(hunks, on_a, t)]
        self.report.candidates = len(found)
        if not found:
            names = sorted({missing_name(o, self._names(hunks)) or o.outcome
                            for t in failing if (o := on_a.results.get(t)) is not None})
            raise _NoCandidate(f"no behavioural fail-to-pass: the {len(failing)} tests of "
                               f"{self.pin.version} that fail on {version}'s source fail on names "
                               f"{version} does not have or do not run ({', '.join(names[:5])})")
        self.targets = found
        self.target_files = sorted({t.split("::", 1)[0] for t in self.targets})
        self.memo[hunks] = on_a
        return self.targets

    def _runs(self, configs: Sequence[frozenset[Hunk]]) -> list[SuiteRun | None]:
        todo = [c for c in dict.fromkeys(configs) if c not in self.memo or (
            self.memo[c] is not None and any(t not in self.memo[c].results for t in self.targets))]
        if todo:
            runs = self.runner.run_many([(self._screened(c), self.target_files) for c in todo],
                                        timeout_s=max(20.0, 5 * self.base_s))
            self.report.test_runs += len(todo)
            self.memo.update(zip(todo, runs, strict=True))
        return [self.memo[c] for c in configs]

    def _fails(self, fix: frozenset[Hunk], test: str) -> bool:
        return self._behavioural(fix, self._runs([fix])[0], test)

    def _minimal_fix(self, test: str, hunks: list[Hunk]) -> list[Hunk] | None:
        def holds(configs: list[list[Hunk]]) -> list[bool]:
            keys = [frozenset(c) for c in configs]
            return [self._behavioural(k, r, test) for k, r in zip(keys, self._runs(keys), strict=True)]

        near = [h for h in hunks if h.path in self.touched.get(test, ())]
        for pool in ([near] if near and len(near) < len(hunks) else []) + [hunks]:
            if len(pool) > MAX_HUNKS:
                self.report.reject("too_many_hunks")
                return None
            found = ddmin(pool, holds)
            if found is not None:
                return found
        return None

    def _task(self, fix: list[Hunk], version: str) -> None:
        pin = self.pin
        buggy = revert(self.files, fix)
        run = self.runner.run_many([(buggy, None)], timeout_s=max(RUN_TIMEOUT_S, 5 * self.base_s))[0]
        self.report.test_runs += 1
        if run is None:
            self.report.reject("reverted_fix_crashes_the_suite")
            return
        failing = {t: run.results.get(t) for t in self.stable
                   if run.results.get(t) is None or run.results[t].outcome != "passed"}
        if not all(self._behavioural(frozenset(fix), run, t) for t in failing):
            self.report.reject("reverted_fix_breaks_tests_on_names")
            return
        if not 1 <= len(failing) <= MAX_FAILING:
            self.report.reject("too_many_fail" if failing else "no_test_fails")
            return
        p2p = [t for t in self.stable if t not in failing]
        if not p2p:
            self.report.reject("no_test_still_passes")
            return
        patch = make_patch({p: (self.files[p], buggy[p]) for p in buggy})
        outcomes = {t: o for t, o in failing.items() if o is not None}
        bugs = tuple({"file": h.path, "operator": OPERATOR, "index": i,
                      "function": enclosing(self.files[h.path], h.line), "line": h.line}
                     for i, h in enumerate(fix))
        statement = changelog_statement(self.top, pin, fix, self.files, sorted(failing))
        if statement is None:
            hidden = [self.test_sources[f] for f in {t.split("::", 1)[0] for t in failing}]
            statement = written_statement(pin, outcomes, hidden, len(p2p), patch=patch, bugs=bugs)
            if only_names_and_exceptions(statement[1]):
                # the failure carried no value or message to describe ("the behaviour it had
                # before"): no report a person would file, so no task (the manifest test
                # refuses such a report anyway; this spares its grading)
                self.report.reject("report_says_nothing")
                return
        title, report, provenance = statement
        record = TaskRecord(task_id(pin.name, patch), pin.name, pin.version, 1, bugs, pin.seed,
                            patch, tuple(sorted(failing)), tuple(p2p), title, report,
                            stats={"screen_s": round(run.seconds, 3), "hunks": len(fix)},
                            provenance=provenance, origin=origin_of(version, pin.version))
        if self.validate is not None:
            ok, problem, timings, *found = self.validate(record)
            if not ok:
                _say(f"{record.id}: rejected by the grader: {problem}", self.quiet)
                self.report.reject(rejection(problem))
                return
            record = TaskRecord(**{**record.__dict__, "stats": {
                **record.stats, **{k: round(float(v), 3) for k, v in timings.items()}},
                "unwithheld": found[0] if found else record.unwithheld})
        self.report.records.append(record)


def release_history(pin: ProjectPin, *, validate: Validator | None = None, quiet: bool = False,
                    before: tuple[str, Release] | None = None,
                    suite: Sequence[str] | None = None) -> HistoryReport:
    """The release-history tasks of ``pin`` (see the module docstring); ``validate`` is the
    real-grader gate (``None``: screening only). ``suite`` is ``pin``'s stable suite as the
    manifest lists it (its synthetic tasks' pass-to-pass): the release's tasks check the same
    tests (those of it that pass in this run's baseline too)."""
    return ReleaseHistory(pin, validate=validate, quiet=quiet, before=before, suite=suite).run()


__all__ = [
    "MAX_FAILING",
    "HistoryError",
    "HistoryReport",
    "ReleaseHistory",
    "behavioural",
    "changelog_statement",
    "counterpart",
    "missing_name",
    "origin_of",
    "previous_release",
    "release_history",
    "release_pairs",
    "written_statement",
]
