"""Splits: stable hashing of ids, the frozen manifest, the held-out guard and burned tasks."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from proofgym.envs.arith import arith_tasks
from proofgym.eval import evaluate
from proofgym.rollout import ReferencePolicy
from proofgym.tasks import (
    BURNED,
    HeldOutError,
    SplitManifest,
    SplitManifestError,
    TaskSet,
    assign_split,
)
from proofgym.verify import QATask
from tests.conftest import REPO

SCRIPT = """
import json, sys
from proofgym.envs.arith import arith_tasks
ts = arith_tasks(300)
print(json.dumps({"splits": {t: ts.split_of(t) for t in ts.ids}, "digest": ts.manifest.digest}))
"""


def test_assignment_is_stable_across_processes() -> None:
    """Another interpreter with a different hash seed assigns the same splits (no ``hash()``)."""
    ts = arith_tasks(300)
    here = {t: ts.split_of(t) for t in ts.ids}
    outs = []
    for hash_seed in ("1", "12345"):
        env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONHASHSEED": hash_seed}
        proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
                              timeout=120, check=True)
        outs.append(json.loads(proc.stdout))
    assert outs[0] == outs[1]
    assert outs[0]["splits"] == here and outs[0]["digest"] == ts.manifest.digest


SPEC_SCRIPT = """
import hashlib, json, sys
out = []
for i in range(500):
    d = hashlib.sha256(("proofgym-split\\0\\0task-%d" % i).encode()).digest()
    p = int.from_bytes(d[:8], "big") / 2.0 ** 64
    out.append("train" if p < 0.8 else "dev" if p < 0.9 else "heldout")
print(json.dumps(out))
"""


def test_assignment_scheme_is_the_same_in_other_python_versions() -> None:
    """The scheme uses only sha256 and integer arithmetic; other interpreters on this machine
    (pyenv versions, if present) compute the same assignments as ours."""
    ours = [assign_split(f"task-{i}") for i in range(500)]
    here = subprocess.run([sys.executable, "-c", SPEC_SCRIPT], capture_output=True, text=True, check=True)
    assert json.loads(here.stdout) == ours
    others = sorted(Path.home().glob(".pyenv/versions/3.*/bin/python3"))
    others += [Path(p) for p in ("/usr/bin/python3",) if Path(p).exists()]
    for interpreter in others:
        proc = subprocess.run([str(interpreter), "-c", SPEC_SCRIPT], capture_output=True, text=True,
                              env={"PATH": os.environ.get("PATH", "")})
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout) == ours, interpreter


def test_assignment_is_a_pure_function_of_the_id() -> None:
    # pinned values: a change of the hashing scheme would silently move tasks between splits
    assert [assign_split(f"task-{i}") for i in range(8)] == [
        assign_split(f"task-{i}", {"train": 0.8, "dev": 0.1, "heldout": 0.1}) for i in range(8)]
    # the documented scheme, re-implemented here: sha256("proofgym-split\0" salt "\0" id), first
    # 8 bytes big-endian as a point in [0, 1), bucketed train | dev | heldout
    def spec(tid: str, salt: str = "") -> str:
        point = int.from_bytes(hashlib.sha256(f"proofgym-split\0{salt}\0{tid}".encode()).digest()[:8],
                               "big") / 2**64
        return "train" if point < 0.8 else "dev" if point < 0.9 else "heldout"

    ids = [f"task-{i}" for i in range(2000)]
    assert [assign_split(t) for t in ids] == [spec(t) for t in ids]
    assert [assign_split(t, salt="s") for t in ids] == [spec(t, "s") for t in ids]
    assert assign_split("task-0") == "heldout"  # pinned: a scheme change must be deliberate
    assert assign_split("task-3", {"train": 0, "dev": 0, "heldout": 1}) == "heldout"
    # order of the task set does not matter
    ts = arith_tasks(100)
    reverse = TaskSet(list(ts)[::-1], name=ts.name)
    assert {t: reverse.split_of(t) for t in ts.ids} == {t: ts.split_of(t) for t in ts.ids}


def test_ratios_are_respected_roughly_and_validated() -> None:
    ts = arith_tasks(400).with_splits(ratios={"train": 0.5, "dev": 0.25, "heldout": 0.25})
    counts = ts.manifest.counts()
    assert sum(counts.values()) == 400
    assert 160 <= counts["train"] <= 240 and 60 <= counts["heldout"] <= 140
    with pytest.raises(SplitManifestError, match="sum to 1"):
        arith_tasks(10).with_splits(ratios={"train": 0.5, "dev": 0.1, "heldout": 0.1})
    with pytest.raises(SplitManifestError, match="unknown split names"):
        arith_tasks(10).with_splits(ratios={"train": 0.9, "test": 0.1})


def test_guard_refuses_heldout_tasks_for_training() -> None:
    ts = arith_tasks(200)
    heldout = ts.manifest.pool("heldout")
    train = ts.for_training()
    assert set(train.ids) == set(ts.manifest.pool("train"))
    with pytest.raises(HeldOutError, match=r"refusing to train on non-training tasks: .*\(heldout\)"):
        train.get(heldout[0])
    with pytest.raises(HeldOutError, match="heldout"):
        ts.manifest.check_training([train.ids[0], heldout[1]])
    rng = np.random.default_rng(0)
    assert all(train.sample(rng).id not in heldout for _ in range(500))
    # an env built on the training view cannot be reset on a held-out task
    from proofgym import InProcessRuntime, UniversalVerifiableEnv

    env = UniversalVerifiableEnv(InProcessRuntime([]), max_turns=1, tasks=train)
    with pytest.raises(HeldOutError):
        env.reset(seed=0, options={"task_id": heldout[0]})
    env.reset(seed=0, options={"task_id": train.ids[0]})


def test_burned_tasks_leave_the_heldout_pool(tmp_path: Path) -> None:
    ts = arith_tasks(200)
    manifest = ts.manifest
    victim = manifest.pool("heldout")[0]
    before = manifest.digest
    with pytest.raises(SplitManifestError, match="reason"):
        manifest.burn(victim, " ")
    manifest.burn(victim, "used to tune the prompt on 2026-11-29")
    assert victim not in manifest.pool("heldout") and manifest.pool(BURNED) == [victim]
    assert manifest.split_of(victim) == BURNED and manifest.digest != before
    assert victim not in ts.split("heldout").ids
    saved = SplitManifest.load(manifest.save(tmp_path / "splits.json"))
    assert saved.burned[victim] == {"reason": "used to tune the prompt on 2026-11-29", "was": "heldout"}
    with pytest.raises(HeldOutError, match="burned"):
        manifest.check_training([victim])  # burned means contaminated, not training data


def test_manifest_round_trips(tmp_path: Path) -> None:
    ts = arith_tasks(50).with_splits(salt="v2")
    path = ts.manifest.save(tmp_path / "m.json")
    data = json.loads(path.read_text())
    first = ts.ids[0]
    assert data["tasks"][first]["content_hash"] == ts[0].content_hash
    assert len(data["tasks"][first]["id_hash"]) == 64 and data["salt"] == "v2"
    loaded = SplitManifest.load(path)
    assert loaded == ts.manifest and loaded.digest == ts.manifest.digest
    assert arith_tasks(50).with_splits(loaded).manifest is loaded


def test_manifest_detects_changed_tasks(tmp_path: Path) -> None:
    tasks = [QATask("q1", "2+2?", "4"), QATask("q2", "3+3?", "6")]
    manifest = TaskSet(tasks, name="qa").manifest
    changed = TaskSet([QATask("q1", "2+2?", "5"), tasks[1]], name="qa")
    with pytest.raises(SplitManifestError, match="'q1' changed"):
        changed.with_splits(manifest)
    (tmp_path / "bad.json").write_text('{"version": 1, "taskset": "x"}')
    with pytest.raises(SplitManifestError, match="lacks the field"):
        SplitManifest.load(tmp_path / "bad.json")


def test_run_dir_freezes_the_manifest_and_records_splits(tmp_path: Path) -> None:
    evaluate("proofgym/Arith-v0", ReferencePolicy(), episodes=20, out=tmp_path)
    manifest = SplitManifest.load(tmp_path / "splits.json")
    contract = json.loads((tmp_path / "contract.json").read_text())
    assert contract["tasks"]["split_manifest"] == manifest.digest
    for line in (tmp_path / "trajectories.jsonl").read_text().splitlines():
        record = json.loads(line)
        assert record["split"] == manifest.split_of(record["task_id"])


def test_splits_cli_freeze_burn_and_eval_heldout(tmp_path: Path, cli) -> None:
    manifest = tmp_path / "m.json"
    cli("splits", "freeze", "proofgym/Guess-v0", "--out", str(manifest), "--ratios", "0.5,0.2,0.3")
    again = cli("splits", "freeze", "proofgym/Guess-v0", "--out", str(manifest), check=False)
    assert again.returncode == 2 and "never overwritten" in again.stdout
    frozen = SplitManifest.load(manifest)
    victim = frozen.pool("heldout")[0]
    cli("splits", "burn", str(manifest), victim, "--reason", "its trace was used in a prompt")
    run = tmp_path / "run"
    cli("eval", "proofgym/Guess-v0", "--split", "heldout", "--splits", str(manifest), "--out", str(run))
    burned = SplitManifest.load(manifest)
    records = [json.loads(x) for x in (run / "trajectories.jsonl").read_text().splitlines()]
    assert sorted(r["task_id"] for r in records) == sorted(burned.pool("heldout"))
    assert victim not in {r["task_id"] for r in records} and {r["split"] for r in records} == {"heldout"}
    contract = json.loads((run / "contract.json").read_text())
    assert contract["tasks"]["split_manifest"] == burned.digest != frozen.digest
    stored = SplitManifest.load(run / "splits.json")
    assert stored.burned[victim]["reason"] == "its trace was used in a prompt"
    # burning another task after the run changes the contract: resuming under it is refused
    cli("splits", "burn", str(manifest), burned.pool("heldout")[0], "--reason", "leaked")
    refused = cli("eval", "proofgym/Guess-v0", "--split", "heldout", "--splits", str(manifest),
                  "--resume", str(run), check=False)
    assert refused.returncode == 2 and "tasks.split_manifest" in refused.stdout + refused.stderr


class _Declared(QATask):
    """A QA task whose source assigns its split (as RepoRepair's recipe does): by its metadata."""

    @property
    def split(self) -> str:  # type: ignore[override]
        return self.metadata["split"]


def _declared_set() -> TaskSet:
    splits = ["heldout"] * 30 + ["dev"] * 10 + ["train"] * 60
    return TaskSet([_Declared(f"d{i}", "1+1?", "2", metadata={"split": s}) for i, s in enumerate(splits)],
                   name="declared")


def test_a_task_that_declares_its_split_keeps_it_in_every_manifest(tmp_path: Path) -> None:
    """One split: the task set's manifest (what eval --split, records, export, serve and the TRL
    guard read) is the tasks' own split, never a second hash split."""
    ts = _declared_set()
    own = {t.id: t.split for t in ts}
    assert {tid: ts.split_of(tid) for tid in ts.ids} == own  # the hash would move some
    assert any(assign_split(tid) != split for tid, split in own.items())
    assert ts.manifest.assigned_by == "task" and ts.manifest.counts()["heldout"] == 30
    assert set(ts.split("heldout").ids) == {t for t, s in own.items() if s == "heldout"}
    with pytest.raises(HeldOutError):
        ts.for_training().get("d0")
    saved = SplitManifest.load(ts.manifest.save(tmp_path / "m.json"))
    assert saved == ts.manifest and ts.with_splits(saved).split_of("d0") == "heldout"
    # hash options cannot make a second split of such a set, and a hash-frozen manifest of it is
    # refused when attached
    for options in ({"ratios": {"train": 0.8, "dev": 0.1, "heldout": 0.1}}, {"salt": "x"},
                    {"group_by": "split"}):
        with pytest.raises(SplitManifestError, match="carry their split"):
            ts.with_splits(**options)
    hashed = SplitManifest.from_dict(json.loads(ts.manifest.to_json()))
    for tid, entry in hashed.tasks.items():  # what a hash split of the same tasks would say
        entry["split"] = assign_split(tid)
    moved = next(t for t, s in own.items() if s == "heldout" and hashed.split_of(t) != "heldout")
    with pytest.raises(SplitManifestError, match=f"'{moved}' is 'heldout' by its source's split rule"):
        ts.with_splits(hashed)
    # a burned task still agrees with its source: it was held out
    ts.manifest.burn("d0", "read while tuning")
    ts.manifest.verify_tasks(ts)
