"""bench/harness.py and bench/speed.py: every speed row in the table, the load column, rows measured
at load > 1.5 marked, and the benches on the public API only. Never a timing value: the machine
running the tests is not a quiet one."""

from __future__ import annotations

import ast
import importlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, require_tool

sys.path.insert(0, str(REPO / "bench"))

import harness
import speed
from harness import INVALID, LOAD_LIMIT, ProbeRun, Target, Value


def table_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("| ")]


def fake_runs(loads: dict[str, float]) -> dict[str, ProbeRun]:
    """A run of every probe of speed.py whose every value is 1 (load per probe as given)."""
    runs: dict[str, ProbeRun] = {}
    for row in speed.ROWS:
        if row.derive is None:
            run = runs.setdefault(row.probe, ProbeRun({}, loads.get(row.probe, 0.5),
                                                      loads.get(row.probe, 0.5), 1.0))
            run.values[row.key] = Value(1.0, row.target.unit if row.target else "s", "detail")
    return runs


def test_the_table_has_every_speed_row_its_target_and_the_load_of_each() -> None:
    results = harness.collect(speed.ROWS, fake_runs({"round_trip": 2.0}), None)
    lines = table_lines(harness.render_table(results, title="t"))
    header, body = lines[0], lines[1:]
    assert "load 1-min (start -> end)" in header and "met?" in header and "target" in header
    assert len(body) == len(speed.ROWS)
    for row, line in zip(speed.ROWS, body, strict=True):
        assert line.startswith(f"| {row.title} |")
        assert (str(row.target) if row.target else "(reported)") in line
        assert "0.50 -> 0.50" in line or "2.00 -> 2.00" in line
        # only the probe that ran at load 2.0 is marked
        assert (INVALID in line) == (row.probe == "round_trip"), line
    # the rows are all there, each against its target
    wanted = {"cold_reset": "<= 20 ms", "bash_round_trip": "<= 0.5 ms", "code_repair_cpu": "<= 0.4 s",
              "verifier_first_verdict": "<= 100 ms", "summary_verify": "<= 100 ms",
              "model_bound_cli": ">= 90%", "oob_efficiency": ">= 90%", "cli_vs_in_process": "<= +10%"}
    assert {r.key: str(r.target) for r in speed.ROWS if r.key in wanted} == wanted


def test_a_row_derived_from_two_probes_takes_their_values_and_the_higher_load() -> None:
    runs = fake_runs({"model_bound_cli": 0.7, "in_process": 1.6})
    runs["model_bound_cli"].values["cli_wall"] = Value(2.1, "s")
    runs["in_process"].values["in_process_wall"] = Value(2.0, "s")
    gap = next(r for r in harness.collect(speed.ROWS, runs, None) if r.row.key == "cli_vs_in_process")
    assert gap.value is not None and math.isclose(gap.value.value, 5.0)
    assert gap.met is True and (gap.load_start, gap.valid) == (1.6, False)
    assert harness.verdict(gap) == f"yes; {INVALID}"


def test_targets_and_the_load_limit() -> None:
    assert Target("<=", 20, "ms").met(20) and not Target("<=", 20, "ms").met(20.01)
    assert Target(">=", 90, "%").met(90) and not Target(">=", 90, "%").met(89.9)
    assert not Target("<=", 20, "ms").met(math.nan)
    run = {"p": ProbeRun({"a": Value(1.0, "ms")}, LOAD_LIMIT, LOAD_LIMIT, 1.0)}
    row = harness.Row("a", "a row", Target("<=", 2, "ms"), "p")
    assert harness.collect([row], run, None)[0].valid  # at the limit: still valid
    run["p"].load_end = LOAD_LIMIT + 0.01
    assert harness.verdict(harness.collect([row], run, None)[0]) == f"yes; {INVALID}"


def test_a_failed_probe_is_a_failed_row_not_a_missing_one() -> None:
    runs = {"p": ProbeRun({}, 0.3, 0.3, 1.0, error="probe p exited 1: boom")}
    rows = [harness.Row("a", "a row", Target("<=", 2, "ms"), "p"),
            harness.Row("b", "b row", None, "q")]
    a, b = harness.collect(rows, runs, {"a"})
    assert harness.verdict(a) == "NO (failed)" and a.error == "probe p exited 1: boom"
    assert b.skipped == "not selected (--only)" and harness.verdict(b) == "not run"
    text = harness.render_table([a, b], title="t")
    assert "boom" in text and "| b row | - | (reported) | not run |" in text


def test_speed_quick_measures_a_row_in_a_fresh_process_and_lists_every_row(tmp_path: Path) -> None:
    """The real path: a probe process, a real sandbox. (The whole --quick run takes minutes, so
    the test measures one row; the table lists every row all the same.)"""
    require_tool("bwrap")
    out = tmp_path / "results.json"
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "speed.py"), "--quick", "--only",
                           "bash_round_trip", "--json", str(out)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = table_lines(proc.stdout)
    assert "load 1-min (start -> end)" in lines[0]
    assert [line.split(" | ")[0][2:] for line in lines[1:]] == [r.title for r in speed.ROWS]
    assert "load average" in proc.stdout.splitlines()[-1]
    results = {r["row"]: r for r in json.loads(out.read_text())}
    assert set(results) == {r.key for r in speed.ROWS}
    measured = results["bash_round_trip"]
    assert measured["error"] is None and measured["value"] > 0 and measured["unit"] == "ms"
    assert measured["valid"] == (max(measured["load_start"], measured["load_end"]) <= LOAD_LIMIT)
    line = next(line for line in lines if line.startswith("| `bash: true` round trip"))
    assert (INVALID in line) == (not measured["valid"])
    assert all(r["skipped"] for key, r in results.items() if key != "bash_round_trip")


BENCHES = ("harness.py", "cputime.py", "speed.py", "workload.py", "throughput.py", "sandbox.py",
           "peers.py", "sandboxed_grading.py", "report_scale.py", "serve_latency.py")


@pytest.mark.parametrize("name", BENCHES)
def test_the_harness_benches_use_only_the_public_api(name: str) -> None:
    """``from proofgym[.package] import NAME`` with NAME in that package's ``__all__``; no
    private module (``proofgym.verify.pool``, ``proofgym.runtimes.sandbox.bwrap``, ...)."""
    tree = ast.parse((REPO / "bench" / name).read_text())
    imported = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "proofgym":
            module = importlib.import_module(node.module)  # type: ignore[arg-type]
            assert Path(module.__file__).name == "__init__.py", f"{name}: private module {node.module}"
            for alias in node.names:
                assert alias.name in module.__all__, f"{name}: {node.module}.{alias.name} is not public"
                imported += 1
        elif isinstance(node, ast.Import):
            assert all(a.name == "proofgym" for a in node.names if a.name.startswith("proofgym")), name
    assert imported or name in ("harness.py", "cputime.py")
