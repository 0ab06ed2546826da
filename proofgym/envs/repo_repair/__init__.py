"""``proofgym/RepoRepair-v0``: fix a bug injected into a real PyPI project, from its bug report.

The tasks are synthesised (:mod:`proofgym.tasks.synth`) from the pinned projects of
``data/recipe.json``; ``data/tasks.jsonl`` is the manifest. Each task's directory is built from
the project's sdist on first use (fetched from PyPI, verified by its sha256, cached). Splits: the
recipe's ``heldout`` projects are held out whole (never in train); within the other projects a
stable hash of the task id puts a tenth of the tasks in ``dev``. Each task carries that split
(:attr:`RepoRepairTask.split`), so the manifest of any task set of them, and everything that
reads it (``eval --split``, records, ``export``, ``serve``, the TRL guard), has it. The tools
and the grading are CodeRepair's (see :mod:`proofgym.envs.code_repair`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from proofgym.core import Limits
from proofgym.core.errors import ConfigError
from proofgym.env import UniversalVerifiableEnv
from proofgym.envs.repo_repair.task import DEV_SHARE, RepoRepairTask, check_record, recipe_split
from proofgym.runtimes.sandbox import SandboxLimits, SandboxRuntime
from proofgym.tasks import TaskSet
from proofgym.tasks.synth import Recipe, TaskRecord, read_manifest
from proofgym.tasks.synth.pin import SdistPrefetch

DATA = Path(__file__).resolve().parent / "data"
RECIPE = DATA / "recipe.json"
MANIFEST = DATA / "tasks.jsonl"


def split_of(record: TaskRecord, recipe: Recipe) -> str:
    """The recipe's split of ``record`` (:func:`~proofgym.envs.repo_repair.task.recipe_split`)."""
    return recipe_split(record, recipe.pin_of(record))


def repo_repair_tasks(manifest: str | Path = MANIFEST, recipe: str | Path = RECIPE, *,
                      split: str | None = None, projects: Sequence[str] | None = None,
                      cache_root: str | Path | None = None) -> TaskSet:
    """The tasks of ``manifest`` (optionally some projects), by id, split by the recipe; with
    ``split``, that split of them (``train``: guarded as :meth:`TaskSet.for_training`)."""
    pins = Recipe.load(recipe)
    records = read_manifest(manifest)
    if not records:
        raise ConfigError(f"{manifest}: no task records; synthesise some with `proofgym tasks synth`")
    chosen = []
    kept = [r for r in records if projects is None or r.project in projects]
    prefetch = SdistPrefetch(pins.pin_of(r) for r in kept)
    # a task's control pairs it with a bug of its project's release (one tuple per release)
    siblings: dict[tuple[str, str], tuple[TaskRecord, ...]] = {}
    for record in records:
        siblings[record.project, record.version] = (*siblings.get((record.project, record.version), ()),
                                                    record)
    for record in kept:
        chosen.append(RepoRepairTask(record, pins.pin_of(record), prefetch=prefetch,
                                     cache_root=Path(cache_root) if cache_root else None,
                                     siblings=siblings[record.project, record.version]))
    if not chosen:
        raise ConfigError(f"no RepoRepair tasks for projects={projects!r}")
    tasks = TaskSet(chosen, name=f"repo-repair:{Path(manifest).name}")
    return tasks.split(split) if split is not None else tasks


def make_env(manifest: str | Path = MANIFEST, recipe: str | Path = RECIPE, split: str | None = None,
             projects: Sequence[str] | None = None, max_tool_calls: int = 40,
             sandbox_limits: SandboxLimits | None = None, cache_root: str | Path | None = None,
             tasks: TaskSet | None = None) -> UniversalVerifiableEnv:
    tasks = tasks if tasks is not None else repo_repair_tasks(manifest, recipe, split=split,
                                                              projects=projects, cache_root=cache_root)
    # each task switches the runtime to its project's image in setup_runtime
    runtime = SandboxRuntime(limits=sandbox_limits)
    return UniversalVerifiableEnv(runtime, max_turns=1, tasks=tasks,
                                  limits=Limits(max_turns=1, max_tool_calls=max_tool_calls))


__all__ = ["DATA", "DEV_SHARE", "MANIFEST", "RECIPE", "RepoRepairTask", "check_record", "make_env",
           "repo_repair_tasks", "split_of"]
