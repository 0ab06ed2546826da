"""A RepoRepair task: a bug injected into a real PyPI project, graded like a CodeRepair task.

Built from one manifest record and its project's pin; its directory (``repo/``, ``hidden/``,
``solution/``) is materialized under the cache on first use, so loading the task set reads only
the manifest. The agent's sandbox gets ``repo/`` (the project with the bug, the failing tests
removed); the grader adds ``hidden/`` in a fresh sandbox and runs the fail-to-pass tests with the
CodeRepair grader (one process per test, mutants, protected paths) and the pass-to-pass tests,
the project's whole stable suite, together in one process (``run_pytest(batch=...)``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from proofgym.core import ActionScript, Task, TaskSpec, Trace, Verdict
from proofgym.core.errors import ConfigError, UngradableTask
from proofgym.envs.code_repair.task import CodeRepairTask
from proofgym.tasks.splits import assign_split
from proofgym.tasks.synth import ProjectPin, TaskRecord, materialize
from proofgym.tasks.synth.images import project_image
from proofgym.tasks.synth.pin import SdistPrefetch
from proofgym.tasks.synth.pipeline import UNGUARDED
from proofgym.verify.sandboxed import TestRun, files_under, run_pytest, swebench_verdict

#: Within a training project, the share of tasks in dev.
DEV_SHARE = 0.1


def recipe_split(record: TaskRecord, pin: ProjectPin) -> str:
    """The recipe's split of a task: ``heldout`` for every task of a held-out project; else
    ``dev`` or ``train`` by a stable hash of the task id (:data:`DEV_SHARE` of them in dev)."""
    if pin.split == "heldout":
        return "heldout"
    return "dev" if assign_split(record.id, {"train": 1 - DEV_SHARE, "dev": DEV_SHARE, "heldout": 0.0},
                                 salt="repo-repair") == "dev" else "train"


@dataclass(frozen=True, eq=False)
class RepoRepairTask(Task):
    record: TaskRecord
    pin: ProjectPin = field(repr=False)
    cache_root: Path | None = field(default=None, repr=False)
    grading_timeout_s: float = 60.0
    test_timeout_s: float = 20.0
    #: the task set's sdists, fetched together when the first is needed (``None``: alone)
    prefetch: SdistPrefetch | None = field(default=None, repr=False, compare=False)
    #: the records of its project's release in the manifest the task comes from (``None``: the
    #: bundled manifest's), where its ``breaks_another_test`` control finds another task's bug
    siblings: tuple[TaskRecord, ...] | None = field(default=None, repr=False, compare=False)

    verifier_version = "repo-repair-1"

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def split(self) -> str:  # type: ignore[override]
        """The recipe's split (:func:`recipe_split`), which every manifest of this task keeps."""
        return recipe_split(self.record, self.pin)

    @property
    def stratum(self) -> str:  # type: ignore[override]
        """The project: a stratified sample (``eval --sample``) covers projects evenly."""
        return self.record.project

    @cached_property
    def inner(self) -> CodeRepairTask:
        """The materialized task, as the CodeRepair task its directory is."""
        # the first use of a project downloads its sdist (with the rest of the set's, in the
        # background, where the set has a prefetch): fetch says so on stderr, with progress
        if self.prefetch is not None:
            self.prefetch.wait(self.pin)
        root = materialize(self.record, self.pin, root=self.cache_root, quiet=False)
        return CodeRepairTask.load(root)

    @property
    def root(self) -> Path:
        return self.inner.root

    def original_file(self, path: str) -> str | None:
        """``path`` as the agent's workspace starts (the project with the bug), or ``None``."""
        return self.inner.original_file(path)

    @cached_property
    def image(self) -> Any:
        """The project's environment image (its pinned test dependencies), or ``None`` for the
        default minimal system."""
        return project_image(self.pin)

    def get_spec(self) -> TaskSpec:
        spec = self.inner.get_spec()
        return TaskSpec(spec.prompt, metadata={**spec.metadata, "project": self.record.project,
                                               "tier": self.record.tier,
                                               "operators": self.record.operators})

    @property
    def hidden_key(self) -> str:  # type: ignore[override]
        return self.inner.hidden_key

    def setup_runtime(self, runtime: Any) -> None:
        runtime.use_snapshot(self.inner.repo, image=self.image)

    def grade_files(self, changes: Mapping[str, bytes | None]) -> TestRun:
        """The grader's test run over ``repo/`` plus ``changes`` plus the hidden tests."""
        inner = self.inner
        return run_pytest(inner.repo, changes, tests=inner.test_ids, hidden=inner.hidden_files,
                          protected=inner.protected, timeout_s=self.grading_timeout_s,
                          test_timeout_s=self.test_timeout_s, image=self.image,
                          max_artifact_bytes=inner.max_artifact_bytes,
                          # the visible pass-to-pass tests (the project's stable suite) in one
                          # process; the hidden fail-to-pass tests each in their own
                          batch=self.record.pass_to_pass,
                          # checks whose value on the reference fix is no plain data stay asserts
                          unwithheld=self.record.unwithheld)

    def verify(self, trace: Trace, runtime: Any) -> Verdict:
        artifact = getattr(runtime, "artifact", None)
        if artifact is None or artifact.runtime != "sandbox":
            raise ConfigError("RepoRepairTask grades the artifact of a SandboxRuntime episode; got "
                              f"{type(runtime).__name__} holding {getattr(artifact, 'runtime', None)!r}")
        limit = (artifact.meta or {}).get("limit_exceeded")
        if limit:
            run = TestRun({}, None, False, f"the artifact exceeded a limit: {limit}", False, "",
                          failure="artifact_rejected")
        else:
            run = self.grade_files(artifact.files)
        if run.failure is None and not run.guarded:
            raise UngradableTask(f"task {self.id}: no hidden test has a mutant or a withheld check, "
                                 "so tampering cannot be detected")
        return swebench_verdict(run, self.record.fail_to_pass, self.record.pass_to_pass)

    def content(self) -> Mapping[str, Any]:
        return {"id": self.id, "record": self.record.to_dict(), "pin": self.pin.to_dict()}

    @cached_property
    def content_hash(self) -> str:  # type: ignore[override]
        """Computed once per task: its content (the frozen record and pin) cannot change, and a
        task set's manifest, its splits and a run's contract each ask every task again (some ten
        times per task per run start: a second of ``asdict`` over the bundled manifest each)."""
        return Task.content_hash.fget(self)  # type: ignore[attr-defined]

    def reference_solution(self) -> ActionScript:
        return self.inner.reference_solution()

    def controls(self) -> Mapping[str, ActionScript]:
        from proofgym.envs.repo_repair.controls import make_controls

        return make_controls(self)


def check_record(record: TaskRecord, pin: ProjectPin, *, cache_root: Path | None = None
                 ) -> tuple[bool, str | None, dict[str, float], dict[str, tuple[str, ...]]]:
    """The synthesis gate on the real grader: the task as given (the bug, hidden tests back)
    must score 0 with every fail-to-pass test failing and every pass-to-pass test passing; the
    original code must score 1. Returns (ok, problem, the reference grading's ``grading_s``
    wall seconds and, where the sandbox has a CPU cgroup, ``grading_cpu_s``, the record's
    ``unwithheld`` list). Checks whose value on the original code is no plain data
    (``TestRun.unplain``) go into that list, and both gradings are made again with it: the
    reference run is what decides which checks stay asserts."""
    ok, problem, stats, fixed = _check(record, pin, cache_root)
    kept = {t: c for t, c in (fixed.unplain if fixed is not None else {}).items()
            if t in record.fail_to_pass}
    if kept and not record.unwithheld:
        record = replace(record, unwithheld=kept)
        ok, problem, stats, _ = _check(record, pin, cache_root)
    return ok, problem, stats, dict(record.unwithheld)


def _check(record: TaskRecord, pin: ProjectPin, cache_root: Path | None
           ) -> tuple[bool, str | None, dict[str, float], TestRun | None]:
    task = RepoRepairTask(record, pin, cache_root=cache_root)
    try:
        buggy = task.grade_files({})
    except Exception as exc:  # a task the grader cannot run is rejected, with the reason
        return False, f"grading the bug raised {type(exc).__name__}: {exc}", {}, None
    if buggy.failure is None and not buggy.guarded:
        return False, f"{UNGUARDED}: {', '.join(buggy.unguarded)} (the bug's grading)", {}, None
    if buggy.failure is not None:
        return False, (f"the bug's grading: failure={buggy.failure}, mutants={buggy.mutants}, "
                       f"tests with withheld checks={len(buggy.withheld)}"), {}, None
    f2p_bad = [t for t in record.fail_to_pass if buggy.results.get(t) == "passed"]
    p2p_bad = [t for t in record.pass_to_pass if buggy.results.get(t) != "passed"]
    if f2p_bad or p2p_bad:
        return (False, f"with the bug: fail-to-pass passing {f2p_bad}, pass-to-pass not passing "
                f"{p2p_bad}", {}, None)
    t0 = time.perf_counter()
    fixed = task.grade_files(files_under(task.root / "solution"))
    stats = {"grading_s": time.perf_counter() - t0}
    if "sandbox_cpu_s" in fixed.timings:
        stats["grading_cpu_s"] = float(fixed.timings["sandbox_cpu_s"])
    verdict = swebench_verdict(fixed, record.fail_to_pass, record.pass_to_pass)
    if verdict.reward != 1.0:
        return False, f"the original code scores {verdict.reward}: {verdict.reason}", stats, fixed
    return True, None, stats, fixed
