"""One split for RepoRepair: every task of a recipe's held-out project is ``heldout`` in the task
set, in ``eval --split``, in the run's records and ``show``, to ``export``, and to the TRL guard (the served
side: tests/serve/test_served_resets.py). The recipe's rule is the only split there is."""

from __future__ import annotations

import json
import re

import pytest

from proofgym.envs.repo_repair import MANIFEST, RECIPE, make_env, repo_repair_tasks, split_of
from proofgym.eval.runs import start_run
from proofgym.integrations.trl.data import prompt_dataset
from proofgym.tasks import HeldOutError, SplitManifest, SplitManifestError, assign_split
from proofgym.tasks.synth import Recipe, read_manifest, write_manifest
from tests.conftest import require_tool
from tests.envs.repo_repair_helpers import offline_cache


def _held_out_ids() -> set[str]:
    recipe = Recipe.load(RECIPE)
    held = {p.name for p in recipe.projects if p.split == "heldout"}
    return {r.id for r in read_manifest(MANIFEST) if r.project in held}


def test_every_task_of_a_held_out_project_is_heldout_in_the_task_set_and_eval_split(tmp_path, cli):
    held = _held_out_ids()
    assert len(held) >= 10, len(held)  # the bundled recipe holds out whole projects (17 tasks after curation)
    tasks = repo_repair_tasks()
    assert {t for t in tasks.ids if tasks.split_of(t) == "heldout"} == held
    recipe = Recipe.load(RECIPE)
    assert all(tasks.split_of(r.id) == split_of(r, recipe) for r in read_manifest(MANIFEST))
    env = make_env()
    try:
        run = start_run(env, {"name": "reference"}, env_id="proofgym/RepoRepair-v0", split="heldout")
        assert set(run.task_ids) == held  # what `eval --split heldout` plans
        assert not held & set(start_run(env, {"name": "reference"}, env_id="proofgym/RepoRepair-v0",
                                        split="dev").task_ids)
        victim = sorted(held)[0]
        with pytest.raises(HeldOutError, match=victim):  # TRL's guard, before any task is built
            prompt_dataset(env, task_ids=[victim])
    finally:
        env.close()
    train = make_env(split="train")
    try:
        assert not held & set(train.tasks.ids) and train.tasks.training
        with pytest.raises(HeldOutError):
            train.tasks.get(victim)
    finally:
        train.close()
    # a frozen manifest of the env is the recipe's split, and ratios cannot make another
    out = tmp_path / "splits.json"
    cli("splits", "freeze", "proofgym/RepoRepair-v0", "--out", str(out))
    assert set(SplitManifest.load(out).pool("heldout")) == held
    refused = cli("splits", "freeze", "proofgym/RepoRepair-v0", "--out", str(tmp_path / "x.json"),
                  "--ratios", "0.8,0.1,0.1", check=False)
    assert refused.returncode == 2 and "carry their split" in refused.stdout


@pytest.mark.sandbox
def test_a_held_out_projects_episodes_are_recorded_heldout_and_never_exported(tmp_path, monkeypatch, cli):
    """A real eval over a recipe that holds out one of the offline fixture projects: its episodes
    are recorded ``heldout`` and `proofgym export` leaves every one of them out."""
    require_tool("bwrap")
    by_project = offline_cache(tmp_path / "cache", monkeypatch)
    held_project, train_project = "first", "six"
    recipe = json.loads(RECIPE.read_text())
    for project in recipe["projects"]:
        project["split"] = "heldout" if project["name"] == held_project else "train"
    recipe_path = tmp_path / "recipe.json"
    recipe_path.write_text(json.dumps(recipe))
    manifest = tmp_path / "tasks.jsonl"
    records = by_project[held_project][:2] + by_project[train_project][:1]
    write_manifest(manifest, records)
    args = ("--env-arg", f"manifest={manifest}", "--env-arg", f"recipe={recipe_path}")
    run = tmp_path / "run"
    cli("eval", "proofgym/RepoRepair-v0", *args, "--out", str(run), "--concurrency", "1")
    lines = [json.loads(x) for x in (run / "trajectories.jsonl").read_text().splitlines()]
    split_by_id = {r["task_id"]: r["split"] for r in lines}
    held = {r.id for r in records[:2]}
    assert {t for t, s in split_by_id.items() if s == "heldout"} == held, split_by_id
    assert all(r["reward"] == 1.0 for r in lines)  # the reference: every episode exportable but for its split
    shown = cli("show", str(run)).stdout
    assert all(re.search(rf"heldout\s+{t}", shown) for t in held), shown
    export = tmp_path / "sft.jsonl"
    done = cli("export", str(run), "--format", "sft", "--out", str(export))
    exported = [json.loads(x)["task_id"] for x in export.read_text().splitlines()]
    assert exported and not held & set(exported), exported
    assert "2 with a held-out task" in done.stdout, done.stdout
    heldout_run = tmp_path / "heldout-run"
    cli("eval", "proofgym/RepoRepair-v0", *args, "--split", "heldout", "--out", str(heldout_run),
        "--concurrency", "1")
    planned = (heldout_run / "trajectories.jsonl").read_text().splitlines()
    assert sorted(json.loads(x)["task_id"] for x in planned) == sorted(held)


def test_a_manifest_with_another_split_is_refused(tmp_path):
    """A manifest of the old hash split is refused when attached (``eval --splits``, ``serve
    --splits``): the recipe's split is the only one."""
    tasks = repo_repair_tasks()
    hashed = SplitManifest.freeze(list(tasks), name=tasks.name, taskset_hash=tasks.content_hash)
    assert hashed.assigned_by == "task"  # freezing keeps the rule; forge the old hash split
    data = json.loads(hashed.to_json())
    for tid, entry in data["tasks"].items():
        entry["split"] = assign_split(tid)
    data.pop("assigned_by")
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    with pytest.raises(SplitManifestError, match="by its source's split rule"):
        tasks.with_splits(SplitManifest.load(path))
