"""Issue 24: splits by a task field (``group_by``), and ``export`` saying what it left out."""

from __future__ import annotations

from collections import defaultdict

import orjson
from conftest import run_cli

from proofgym.envs.arith import arith_tasks
from proofgym.eval import evaluate
from proofgym.rollout import RandomPolicy
from proofgym.tasks import SplitManifest


def test_freeze_by_a_task_field_keeps_each_group_in_one_split(tmp_path) -> None:
    out = tmp_path / "by-level.json"
    proc = run_cli("splits", "freeze", "proofgym/Arith-v0", "--group-by", "level", "--ratios", "0.5,0,0.5",
                   "--out", str(out))
    assert "grouped by level" in proc.stdout
    data = orjson.loads(out.read_bytes())
    assert data["group_by"] == "level"
    splits_of = defaultdict(set)
    for entry in data["tasks"].values():
        splits_of[entry["group"]].add(entry["split"])
    assert set(splits_of) == {"1", "2", "3", "4"}
    assert all(len(s) == 1 for s in splits_of.values())  # a level never straddles two splits
    assert {s for ss in splits_of.values() for s in ss} == {"train", "heldout"}  # both used
    loaded = SplitManifest.load(out)
    assert loaded.group_by == "level" and loaded.digest == SplitManifest.from_dict(data).digest


def test_a_per_task_manifest_is_unchanged_by_the_group_by_field() -> None:
    tasks = arith_tasks(20)
    manifest = tasks.with_splits(ratios={"train": 0.8, "dev": 0.1, "heldout": 0.1}).manifest
    assert "group_by" not in manifest.to_dict() and manifest.group_by is None
    assert all("group" not in e for e in manifest.tasks.values())


def test_group_by_a_function_and_a_missing_key(tmp_path) -> None:
    tasks = arith_tasks(40)
    by_parity = tasks.with_splits(group_by=lambda t: int(t.id[-1]) % 2).manifest
    groups = defaultdict(set)
    for tid, entry in by_parity.tasks.items():
        groups[int(tid[-1]) % 2].add(entry["split"])
    assert all(len(s) == 1 for s in groups.values())
    proc = run_cli("splits", "freeze", "proofgym/Arith-v0", "--group-by", "template",
                   "--out", str(tmp_path / "m.json"), check=False)
    message = " ".join(proc.stdout.split())
    assert proc.returncode == 2 and "Traceback" not in proc.stdout + proc.stderr
    assert "has no metadata key 'template' (its keys: level)" in message
    assert not (tmp_path / "m.json").exists()


def test_export_says_what_it_left_out(tmp_path) -> None:
    run = tmp_path / "run"
    trajectories, _ = evaluate("proofgym/Arith-v0", RandomPolicy(1), episodes=20, out=run, verifier="inline")
    heldout = sum(t.split == "heldout" for t in trajectories)  # dev episodes may be exported
    below = sum(t.split != "heldout" and t.reward is not None and t.reward < 1.0 for t in trajectories)
    assert heldout and below
    proc = run_cli("export", str(run), "--out", str(tmp_path / "sft.jsonl"))
    out = " ".join(proc.stdout.split())
    assert "wrote 0 records from 20 trajectories" in out
    assert f"left out: {below} scored below --min-reward 1" in out
    assert f"never exported: {heldout} with a held-out task (--include-heldout exports them)" in out
