"""Issue 24: re-grading semantics: the verifier version is recorded next to each verdict, and a
summary never averages two verifier versions unless asked to (``--allow-mixed-versions``)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from conftest import run_cli

from proofgym.envs.arith import arith_tasks
from proofgym.eval import evaluate
from proofgym.rollout import ReferencePolicy
from proofgym.verify.regrade import RegradeError, regrade_run

ARITH = "proofgym/Arith-v0"


@pytest.fixture
def run(tmp_path) -> Path:
    out = tmp_path / "run"
    evaluate(ARITH, ReferencePolicy(), episodes=4, out=out, verifier="inline")
    return out


def _verdicts(run: Path) -> list[dict]:
    return [orjson.loads(x) for x in (run / "verdicts.jsonl").read_bytes().splitlines()]


def test_each_verdict_records_its_version_and_the_one_it_regrades(run: Path) -> None:
    proc = run_cli("verify", str(run), "--verifier", "inline")
    records = _verdicts(run)
    assert len(records) == 4
    assert {r["verifier_version"] for r in records} == {"arith-1"}
    assert {r["previous"]["verifier_version"] for r in records} == {"arith-1"}
    assert all(r["verdict"]["grader"].endswith("@arith-1") for r in records)
    assert "version arith-1" in proc.stdout and "4 re-graded" in proc.stdout


def test_original_verdicts_of_two_versions_are_refused_unless_allowed(run: Path) -> None:
    lines = (run / "trajectories.jsonl").read_bytes().splitlines()
    first = orjson.loads(lines[0])
    first["verdict"]["grader"] = "ArithTask@arith-0"  # as a run resumed after its grader changed
    (run / "trajectories.jsonl").write_bytes(b"\n".join([orjson.dumps(first), *lines[1:]]) + b"\n")
    refused = run_cli("verify", str(run), "--verifier", "inline", check=False)
    message = " ".join((refused.stdout + refused.stderr).split())
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "refusing to summarise two verifier versions" in message
    assert "'arith-0' (1 trajectories)" in message
    assert "--allow-mixed-versions" in message
    assert not (run / "verdicts.jsonl").exists()  # refused before anything was graded or written
    allowed = run_cli("verify", str(run), "--verifier", "inline", "--allow-mixed-versions")
    assert "arith-0 (1), arith-1 (3)" in " ".join(allowed.stdout.split())
    assert sorted(r["previous"]["verifier_version"] for r in _verdicts(run)) == ["arith-0", *["arith-1"] * 3]


def test_new_verdicts_of_two_versions_are_refused_unless_allowed(run: Path) -> None:
    tasks = arith_tasks(400)
    # one task's grader moved on to a new version (its content, and so its hash, is unchanged)
    moved = next(t for t in tasks if t.id == orjson.loads(
        (run / "trajectories.jsonl").read_bytes().splitlines()[0])["task_id"])
    object.__setattr__(moved, "verifier_version", "arith-2")
    with pytest.raises(RegradeError, match="the new verdicts would come from 2 verifier versions"):
        regrade_run(run, tasks=tasks)
    assert not (run / "verdicts.jsonl").exists()
    report = regrade_run(run, tasks=tasks, allow_mixed_versions=True)
    assert {v: e["regraded"] for v, e in report.versions.items()} == {"arith-1": 3, "arith-2": 1}
    assert sorted(r["verifier_version"] for r in _verdicts(run)) == ["arith-1"] * 3 + ["arith-2"]
