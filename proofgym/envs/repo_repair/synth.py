"""Synthesising RepoRepair tasks for a recipe, each gated by the real grader (the Python API
behind ``proofgym tasks synth``)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson

from proofgym.core.errors import ConfigError
from proofgym.envs.repo_repair.task import check_record
from proofgym.tasks.synth import (
    ProjectReport,
    Recipe,
    TaskRecord,
    read_manifest,
    synthesize_project,
    write_manifest,
)
from proofgym.tasks.synth.discover import list_test_files, source_files
from proofgym.tasks.synth.fetch import FetchError, Release
from proofgym.tasks.synth.history import HistoryError, HistoryReport, release_history, release_pairs
from proofgym.tasks.synth.images import check_project_image, lock_lines, project_image
from proofgym.tasks.synth.manifest import SYNTHETIC, pristine_tree, read_suites
from proofgym.tasks.synth.pin import detect_layout
from proofgym.tasks.synth.recipe import RELEASE_LAYOUT, ProjectPin
from proofgym.verify.sandboxed import guarded_tests, keep_no_spares


def read_reports(path: str | Path) -> dict[str, dict[str, Any]]:
    """The per-project synthesis reports kept next to a manifest (``{}`` if none yet)."""
    path = Path(path)
    if not path.is_file():
        return {}
    return dict(orjson.loads(path.read_bytes()))


def synthesize(recipe: str | Path | Recipe, manifest: str | Path, *, reports: str | Path | None = None,
               projects: Sequence[str] | None = None, max_tasks: int | None = None,
               time_budget_s: float | None = None, grade: bool = True, quiet: bool = False,
               cache_root: str | Path | None = None) -> list[ProjectReport]:
    """Synthesise tasks for ``projects`` of ``recipe`` (default: all), one project at a time,
    and write them into ``manifest`` (replacing those projects' earlier synthetic tasks; the
    others stay).
    With ``grade`` each kept candidate must pass :func:`check_record` (the real grader scores the
    bug 0 and the original 1). ``reports`` (default: ``manifest`` with ``.report.json``) records
    per project what was tried, kept and rejected, and how long it took.

    A project whose image would hold its own modules (see
    :func:`~proofgym.tasks.synth.images.check_project_image`) is refused before any work, with an
    :class:`~proofgym.runtimes.sandbox.ImageError` saying which and what to do."""
    recipe_path = None if isinstance(recipe, Recipe) else Path(recipe)
    recipe = recipe if isinstance(recipe, Recipe) else Recipe.load(recipe)
    names = list(projects) if projects else [p.name for p in recipe.projects]
    pins = [recipe.project(n) for n in names]
    for pin in pins:
        check_project_image(pin)
    keep_no_spares()  # each grading is over a new task tree: a spare runner would only linger
    manifest = Path(manifest)
    reports = Path(reports) if reports else manifest.with_suffix(".report.json")
    done: list[ProjectReport] = []
    root = Path(cache_root) if cache_root else None
    for pin in pins:
        if pin.requirements and not pin.lock:  # pin the image's wheels once, in the recipe
            pin = replace(pin, lock=lock_lines(pin, progress=None if quiet else _progress))  # checked
            recipe = recipe.with_project(pin)
            if recipe_path is not None:
                recipe_path.write_bytes(recipe.to_json())

        image = project_image(pin)
        if grade and image is not None:  # refused here, not as a rejection of every candidate
            image.build(progress=None if quiet else _progress)

        def validate(record: TaskRecord, pin=pin) -> tuple[bool, str | None, dict[str, float]]:
            return check_record(record, pin, cache_root=root)

        report = synthesize_project(pin, validate=validate if grade else None, quiet=quiet,
                                    max_tasks=max_tasks, time_budget_s=time_budget_s,
                                    guard=guarded_tests if grade else None)
        # only this project's synthetic tasks are replaced: its release-history ones stay
        _replace(manifest, reports, pin.name, report, synthetic=True)
        done.append(report)
    return done


def synthesize_history(recipe: str | Path | Recipe, manifest: str | Path, *,
                       projects: Sequence[str] | None = None, grade: bool = True,
                       quiet: bool = False, cache_root: str | Path | None = None,
                       before: tuple[str, Release] | None = None, pairs: int = 1,
                       skip: int = 0) -> list[HistoryReport]:
    """Tasks from each project's release history (:mod:`proofgym.tasks.synth.history`), each gated
    by :func:`check_record` with ``grade``: the fixes of the pinned release ``b`` since the release
    before it and, with ``pairs`` K > 1, of each of the K - 1 release pairs before that (each pair
    with its own ``b``'s source and stable suite). A pair's tasks replace that pair's earlier ones
    in ``manifest`` (the project's synthetic tasks, its other pairs and other projects stay); an
    earlier ``b`` that gave tasks is added to the project's ``releases`` in the recipe (written
    back when ``recipe`` is a path), so the tasks can be built. Per project and pair the report,
    with the one-line reason when it gave none, goes to ``manifest`` with ``.history.json``.
    ``skip`` leaves out the first pairs (those already synthesised). ``before`` names release
    ``a`` instead of asking the index (one project, one pair)."""
    recipe_path = None if isinstance(recipe, Recipe) else Path(recipe)
    recipe = recipe if isinstance(recipe, Recipe) else Recipe.load(recipe)
    keep_no_spares()
    manifest = Path(manifest)
    reports = manifest.with_suffix(".history.json")
    names = list(projects) if projects else [p.name for p in recipe.projects]
    if before is not None and (len(names) != 1 or pairs != 1):
        raise ConfigError("a release to compare with is one project's: name exactly one project "
                         "and one pair")
    if pairs < 1 or skip < 0:
        raise ConfigError(f"pairs must be at least 1 and skip at least 0, not {pairs} and {skip}")
    root = Path(cache_root) if cache_root else None
    done = []
    for name in names:
        pin = recipe.project(name)
        if before is not None:
            chain = [((pin.version, None), before)]
        else:
            try:
                chain = release_pairs(name, pin.version, pairs)[skip:]
            except (HistoryError, FetchError) as exc:
                report = HistoryReport(name, pin.version, reason=str(exc))
                _replace(manifest, reports, name, report, synthetic=False, version=pin.version)
                done.append(report)
                continue
        for (after, after_release), older in chain:
            if after == pin.version:
                pair_pin = pin
            elif after_release is None:
                continue
            else:
                pair_pin = pin.with_release(after, after_release.sha256, after_release.url).at(after)
            pair_pin, layout = release_layout(pair_pin)

            def validate(record: TaskRecord, pin=pair_pin) -> tuple[bool, str | None, dict[str, float]]:
                return check_record(record, pin, cache_root=root)

            known = read_suites(manifest).get(name)
            report = release_history(pair_pin, validate=validate if grade else None, quiet=quiet,
                                     before=older, suite=known.tests if known is not None
                                     and known.version == after else None)
            if report.records and pair_pin is not pin:
                recipe = recipe.with_project(recipe.project(name).with_release(
                    after, pair_pin.sha256, pair_pin.url, layout=layout))
                if recipe_path is not None:
                    recipe_path.write_bytes(recipe.to_json())
            _replace(manifest, reports, name, report, synthetic=False, version=after,
                     key=name if after == pin.version else f"{name}=={after}")
            done.append(report)
    return done


def release_layout(pin: ProjectPin) -> tuple[ProjectPin, dict[str, list[str]] | None]:
    """``pin`` (an earlier release of a walk back) laid out as its own sdist is: itself when the
    recipe's test and source paths are in it, else with the layout read off the sdist
    (:func:`~proofgym.tasks.synth.pin.detect_layout`; semver before 3.0.0 had no ``src``) and
    that layout, for the recipe's ``releases`` entry. ``pin`` itself, when its sdist cannot be
    fetched or its layout not detected (its pair then says why it gives none)."""
    try:
        top = pristine_tree(pin, quiet=True)
    except FetchError:
        return pin, None
    try:
        source_files(top, pin.source, pin.tests)
        list_test_files(top, pin.tests)
        return pin, None
    except ValueError:
        pass
    try:
        found = detect_layout(top)
    except (FetchError, ValueError):
        return pin, None
    layout = {k: found[k] for k in RELEASE_LAYOUT if list(getattr(pin, k)) != found[k]}
    return replace(pin, **{k: tuple(v) for k, v in layout.items()}), layout


def _replace(manifest: Path, reports: Path, project: str, report: ProjectReport | HistoryReport, *,
             synthetic: bool, version: str | None = None, key: str | None = None) -> None:
    """Write ``report``'s records into ``manifest`` in place of ``project``'s earlier tasks of the
    same origin (synthetic, or from release history of release ``version``; the other origin,
    other releases and other projects stay), and its report into ``reports`` (under ``key``,
    default the project)."""
    records = [r for r in (read_manifest(manifest) if manifest.is_file() else [])
               if r.project != project or (r.origin == SYNTHETIC) != synthetic
               or (version is not None and r.version != version)]
    write_manifest(manifest, [*records, *report.records])
    saved = read_reports(reports)
    saved[key or project] = report.to_dict()
    reports.write_bytes(orjson.dumps(dict(sorted(saved.items())), option=orjson.OPT_INDENT_2))


def _progress(message: str) -> None:
    sys.stderr.write(f"proofgym synth: {message}\n")
