"""Issue 24: the README's Ray example on a small machine: a local cluster runs the slots it has
room for, with a warning, instead of refusing."""

from __future__ import annotations

import orjson
import pytest
from conftest import run_cli

from tests.ray_helpers import require_ray

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]


def test_a_local_cluster_caps_the_concurrency_with_a_warning(tmp_path, monkeypatch) -> None:
    require_ray()
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    # more slots than any test machine has CPUs: capped to the cluster's room, never refused
    proc = run_cli("eval", "proofgym/Arith-v0", "-n", "4", "-c", "1000", "--backend", "ray",
                   "--out", str(tmp_path / "run"), timeout=300)
    out = " ".join((proc.stdout + proc.stderr).replace("│", " ").split())
    assert "warning: the local Ray cluster has room for" in out and "instead of -c 1000" in out, out
    summary = orjson.loads((tmp_path / "run" / "summary.json").read_bytes())
    assert summary["episodes"] == 4 and summary["mean_reward"] == 1.0
    assert 1 <= summary["concurrency"] < 1000
