"""RepoRepair tests run offline: the sdists of a few small bundled projects are fixtures, copied
into a fresh cache (``PROOFGYM_CACHE``) where :func:`proofgym.tasks.synth.fetch_sdist` finds
them by their pinned sha256, exactly as a cache filled by an earlier download."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from proofgym.envs.repo_repair import MANIFEST, RECIPE, RepoRepairTask
from proofgym.tasks.synth import Recipe, TaskRecord, read_manifest

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "sdists"
#: Sdists only the tests that name a task of theirs seed (:func:`offline_task`): the samples
#: other tests draw from :func:`offline_records` stay as they were.
MORE_FIXTURES = FIXTURES.parent / "sdists-more"


def fixture_projects() -> dict[str, Path]:
    """Project name -> its fixture sdist, for the recipe's projects that have one."""
    pins = {p.sha256: p.name for p in Recipe.load(RECIPE).projects}
    found = {}
    for sdist in sorted(FIXTURES.glob("*.tar.gz")):
        sha = hashlib.sha256(sdist.read_bytes()).hexdigest()
        assert sdist.name.startswith(sha), f"{sdist.name}: its name must start with its sha256"
        if sha in pins:
            found[pins[sha]] = sdist
    return found


def seed_cache(cache: Path) -> None:
    (cache / "sdists").mkdir(parents=True, exist_ok=True)
    for sdist in FIXTURES.glob("*.tar.gz"):
        shutil.copy(sdist, cache / "sdists" / sdist.name)


def offline_records() -> list[TaskRecord]:
    """The bundled records whose sdist (their project's, at their version) is a fixture."""
    have = {hashlib.sha256(p.read_bytes()).hexdigest() for p in fixture_projects().values()}
    recipe = Recipe.load(RECIPE)
    return [r for r in read_manifest(MANIFEST) if recipe.pin_of(r).sha256 in have]


def task_of(record: TaskRecord, cache: Path) -> RepoRepairTask:
    return RepoRepairTask(record, Recipe.load(RECIPE).pin_of(record), cache_root=cache / "tasks")


def offline_cache(cache: Path, monkeypatch) -> dict[str, list[TaskRecord]]:
    """Make ``cache`` this test's ``PROOFGYM_CACHE``, seeded with the fixture sdists; the
    bundled records that can run from it, by project."""
    monkeypatch.setenv("PROOFGYM_CACHE", str(cache))
    seed_cache(cache)
    by_project: dict[str, list[TaskRecord]] = {}
    for record in offline_records():
        by_project.setdefault(record.project, []).append(record)
    return by_project


def offline_task(task_id: str, cache: Path, monkeypatch) -> RepoRepairTask:
    """The bundled task ``task_id``, offline: ``cache`` is this test's ``PROOFGYM_CACHE``,
    seeded with every fixture sdist (also :data:`MORE_FIXTURES`)."""
    monkeypatch.setenv("PROOFGYM_CACHE", str(cache))
    seed_cache(cache)
    for sdist in MORE_FIXTURES.glob("*.tar.gz"):
        shutil.copy(sdist, cache / "sdists" / sdist.name)
    return task_of(next(r for r in read_manifest(MANIFEST) if r.id == task_id), cache)
