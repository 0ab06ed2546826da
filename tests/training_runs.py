"""Checks on the run directory a training front door wrote (``proofgym serve --record DIR``, the
TRL adapter's ``record_dir=``): the commands read it, its verdicts are the rewards the trainer got,
and its contract names how the trainer versions its policy."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson
from typer.testing import CliRunner

from proofgym.cli.main import app
from proofgym.record import load_run


def check_training_run(root: Path, rewards: Mapping[str, float | None], versions: Mapping[str, str],
                       ages: Mapping[str, int], versioned_by: str,
                       task_rules: bool = True) -> list[dict[str, Any]]:
    """``root`` holds the episodes of ``rewards`` (trajectory id -> the reward the trainer
    received), each with its policy version (``versions``) and age in versions (``ages``), under a
    contract whose policy is ``versioned_by``; ``show``, ``audit`` and ``export --format rl`` read
    it (``task_rules=False``: an env given as a callable, which ``audit`` cannot rebuild by id).
    Returns the rl export's records."""
    run = load_run(root)
    assert run.contract is not None and run.contract["policy"]["versioned_by"] == versioned_by
    deadline = time.monotonic() + 30
    while not set(rewards) <= {t.trajectory_id for t in run.trajectories} and time.monotonic() < deadline:
        time.sleep(0.1)  # a served episode is recorded as its grade lands, just after the reply
        run = load_run(root)
    by_id = {t.trajectory_id: t for t in run.trajectories}
    assert set(rewards) <= set(by_id)
    for tid in rewards:
        traj = by_id[tid]
        assert tid.startswith(f"{run.contract['contract_id']}/{traj.task_id}#")  # record.ids' form
        assert traj.reward == rewards[tid], tid
        assert traj.policy["version"] == versions[tid] and traj.policy["versioned_by"] == versioned_by
        assert traj.extra["age"] == ages[tid], tid
        assert traj.split == "train" and traj.artifact is not None  # provenance, and re-gradable
    cli = CliRunner()
    shown = cli.invoke(app, ["show", str(root)], env={"COLUMNS": "300"})
    assert shown.exit_code == 0 and all(t.task_id in shown.output for t in run.trajectories), shown.output
    first = sorted(by_id)[0]
    one = cli.invoke(app, ["show", str(root), first], env={"COLUMNS": "300"})
    assert one.exit_code == 0 and first in one.output, one.output
    audited = cli.invoke(app, ["audit", str(root), "--min-reward", "0",
                               *([] if task_rules else ["--no-task-rules"])], env={"COLUMNS": "300"})
    assert audited.exit_code == 0, (audited.output, audited.exception)
    assert f"of {len(run.trajectories)} trajectories" in audited.output, audited.output
    out = root / "export-rl.jsonl"
    exported = cli.invoke(app, ["export", str(root), "--format", "rl", "--out", str(out)],
                          env={"COLUMNS": "300"})
    assert exported.exit_code == 0, exported.output
    assert f"from {len(run.trajectories)} trajectories" in " ".join(exported.output.split())
    return [orjson.loads(line) for line in out.read_bytes().splitlines()]
