"""The distribution report (``proofgym tasks stats``) and the recipe's checks of bad input."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from proofgym.envs.repo_repair import MANIFEST
from proofgym.tasks.synth import Recipe, RecipeError, TaskRecord, read_manifest
from proofgym.tasks.synth.recipe import ProjectPin
from proofgym.tasks.synth.stats import distribution, format_report
from tests.conftest import REPO


def _record(project: str, tier: int, f2p: int, operators: list[str], grading: float) -> TaskRecord:
    return TaskRecord(id=f"{project}-{tier}-{f2p}-{grading}", project=project, version="1", tier=tier,
                      bugs=tuple({"file": "m.py", "operator": op, "index": 0, "function": "f",
                                  "line": 1} for op in operators),
                      seed=0, patch="", fail_to_pass=tuple(f"t.py::test_{i}" for i in range(f2p)),
                      pass_to_pass=("t.py::test_ok",), title="", bug_report="",
                      stats={"grading_s": grading, "grading_cpu_s": grading / 2})


def test_the_report_counts_projects_operators_tiers_and_the_histogram():
    records = [_record("a", 1, 1, ["flip_compare"], 1.0), _record("a", 1, 2, ["drop_loop"], 3.0),
               _record("b", 2, 2, ["flip_compare", "swap_arguments"], 2.0)]
    synth = {"a": {"tried": 10, "kept": 2, "seconds": 60.0, "stable_tests": 40},
             "b": {"tried": 5, "kept": 1, "seconds": 30.0, "stable_tests": 9}}
    report = distribution(records, synth, {r.id: "train" for r in records})
    assert report["tasks"] == 3
    assert report["projects"]["a"] == {"tasks": 2, "release_history": 0, "tier1": 2, "tier2": 0,
                                       "stable_tests": 40, "candidates_tried": 10, "validation_rate": 0.2,
                                       "median_grading_s": 2.0, "synthesis_s": 60.0}
    assert report["operators"] == {"drop_loop": 1, "flip_compare": 2, "swap_arguments": 1}
    assert report["tiers"] == {"1": 2, "2": 1}
    assert report["fail_to_pass_histogram"] == {"1": 1, "2": 2}
    assert report["validation_rate"] == 0.2 and report["candidates_per_minute"] == 10.0
    assert report["median_grading_s"] == 2.0 and report["median_grading_cpu_s"] == 1.0
    text = format_report(report)
    assert "| a | 2 | 0 | 2 | 0 | 40 | 10 | 20% | 2.0 |" in text and "| flip_compare | 2 |" in text


def test_tasks_stats_on_the_bundled_manifest():
    proc = subprocess.run([sys.executable, "-m", "proofgym", "tasks", "stats", "--json"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    records = read_manifest(MANIFEST)
    assert report["tasks"] == len(records)
    assert sum(p["tasks"] for p in report["projects"].values()) == len(records)
    assert sum(report["fail_to_pass_histogram"].values()) == len(records)
    # synthesis keeps bugs that fail 1 to 5 tests; a real fix from release history, up to 10
    assert all(1 <= int(n) <= 10 for n in report["fail_to_pass_histogram"]), report["fail_to_pass_histogram"]
    synthetic = [r for r in records if r.origin == "synthetic operator"]
    assert all(1 <= len(r.fail_to_pass) <= 5 for r in synthetic)
    assert sum(report["splits"].values()) == len(records)
    # per origin: the release-history tasks are counted apart, per project and in all
    history = [r for r in records if r.origin != "synthetic operator"]
    assert report["origins"]["synthetic operator"]["tasks"] == len(synthetic)
    assert report["origins"]["release history"]["tasks"] == len(history) > 0
    assert report["origins"]["release history"]["projects"] == len({r.project for r in history})
    assert sum(p["release_history"] for p in report["projects"].values()) == len(history)


def test_a_bad_recipe_says_what_is_wrong(tmp_path):
    good = {"name": "x", "version": "1", "sha256": "0" * 64, "source": ["x"]}
    with pytest.raises(RecipeError, match="unknown keys"):
        Recipe.of([{**good, "sources": ["x"]}])
    with pytest.raises(RecipeError, match="sha256 must be 64 hex digits"):
        Recipe.of([{**good, "sha256": "abc"}])
    with pytest.raises(RecipeError, match="split must be one of"):
        Recipe.of([{**good, "split": "test"}])
    with pytest.raises(RecipeError, match="more than once"):
        Recipe.of([good, good])
    path = tmp_path / "r.json"
    path.write_text('{"projects": []}')
    with pytest.raises(RecipeError, match="not a version-1 recipe"):
        Recipe.load(path)


@pytest.mark.pure
def test_with_project_replaces_a_pin_by_name_and_adds_a_new_one(tmp_path):
    recipe = Recipe.of([{"name": "x", "version": "1", "sha256": "0" * 64, "source": ["x"]}])
    bumped = recipe.with_project(ProjectPin.from_dict(
        {"name": "x", "version": "2", "sha256": "1" * 64, "source": ["x"]}))
    assert [(p.name, p.version) for p in bumped.projects] == [("x", "2")]
    added = bumped.with_project(ProjectPin.from_dict(
        {"name": "y", "version": "1", "sha256": "2" * 64, "source": ["y"]}))
    assert [p.name for p in added.projects] == ["x", "y"]
    path = tmp_path / "r.json"
    path.write_bytes(added.to_json())
    assert [p.name for p in Recipe.load(path).projects] == ["x", "y"]
