"""Issue 24: honest time accounting: the grader pool's start-up is reported apart from grading
(CLI, summary, a re-made report), and the grading sandboxes' CPU is exposed in the summary."""

from __future__ import annotations

import os

import orjson
import pytest
from conftest import run_cli


def _flat(text: str) -> str:
    return " ".join(text.replace("│", " ").split())


def test_grader_start_up_is_reported_apart_everywhere(tmp_path) -> None:
    out = tmp_path / "run"
    proc = run_cli("eval", "proofgym/Arith-v0", "-n", "20", "--verifier", "process", "--out", str(out))
    summary = orjson.loads((out / "summary.json").read_bytes())
    startup = summary["time"]["verifier_startup_s"]
    assert startup > 0
    # the start-up is not in any episode's verify time: the sum of those is the summary's verify_s
    records = [orjson.loads(x) for x in (out / "trajectories.jsonl").read_bytes().splitlines()]
    assert summary["time"]["verify_s"] == pytest.approx(sum(r["timings"]["verify_s"] for r in records))
    assert "grader start-up" in _flat(proc.stdout) and "not in verify" in _flat(proc.stdout)
    (out / "report.html").unlink()
    again = run_cli("report", str(out))  # the report is re-made from the records: start-up kept
    assert f"grader start-up {startup:.2f} s" in _flat(again.stdout)
    html = (out / "report.html").read_text()
    assert "grader start-up" in html and "once per run, apart" in html


@pytest.mark.skipif(os.geteuid() != 0, reason="a grading sandbox's CPU is read from its cgroup: root only")
def test_the_grading_sandboxes_cpu_is_in_the_summary(tmp_path) -> None:
    out = tmp_path / "run"
    proc = run_cli("eval", "proofgym/CodeRepair-v0", "-n", "2", "--out", str(out))
    summary = orjson.loads((out / "summary.json").read_bytes())
    records = [orjson.loads(x) for x in (out / "trajectories.jsonl").read_bytes().splitlines()]
    per_episode = [r["verdict"]["metrics"]["sandbox_cpu_s"] for r in records]
    assert all(cpu > 0 for cpu in per_episode)  # pytest ran in each grading sandbox
    assert summary["time"]["sandbox_cpu_s"] == pytest.approx(sum(per_episode))
    assert "sandbox CPU" in _flat(proc.stdout)
