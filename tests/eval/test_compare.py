"""`proofgym compare` on real runs written by the README's commands, and compare.html in Chromium."""

from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path

import orjson
import pytest

from proofgym.eval.compare import ComparisonError, compare
from proofgym.eval.compare_html import COMPARE_HTML
from proofgym.record import RolloutContract
from proofgym.record.rundir import load_run
from tests.eval.test_report import chromium, page_requests

N = 10
PAYLOAD = '</code><img src="http://evil.invalid/x.png"><b>bold</b>'


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    from tests.conftest import run_cli

    root = tmp_path_factory.mktemp("compare")
    ref, wrong = root / "arith-reference", root / "arith-wrong"
    run_cli("eval", "proofgym/Arith-v0", "-n", str(N), "--policy", "reference", "--out", str(ref))
    run_cli("eval", "proofgym/Arith-v0", "-n", str(N), "--policy", "control:known_wrong", "--out", str(wrong))
    same = root / "arith-reference-again"
    shutil.copytree(ref, same)
    return {"ref": ref, "wrong": wrong, "same": same, "root": root}


def test_reference_vs_control_flips_every_task_significantly(runs, cli, tmp_path):
    proc = cli("compare", str(runs["ref"]), str(runs["wrong"]), "--by", "level", "--by", "split",
               "--by", "end_reason", "--out", str(tmp_path))
    assert f"{N} paired tasks" in proc.stdout and "0 fixed, 10 broken" in proc.stdout
    result = orjson.loads((tmp_path / "compare.json").read_bytes())
    (pair,) = result["pairs"]
    assert pair["tasks"] == N and pair["episode_pairs"] == N
    assert pair["mean_reward"]["delta"] == -1.0 and pair["mean_reward"]["ci"] == [-1.0, -1.0]
    assert pair["mean_reward"]["ci_excludes_zero"]
    assert pair["mcnemar"]["a_only"] == N and pair["mcnemar"]["b_only"] == 0
    assert pair["mcnemar"]["p_value"] == pytest.approx(2 * 0.5 ** N) and pair["mcnemar"]["p_value"] < 0.01
    assert pair["win_tie_loss"] == {"win": 0, "tie": 0, "loss": N}
    assert sorted(pair["flipped"]["broken"]) == sorted(r["task_id"] for r in pair["per_task"])
    assert pair["flipped"]["fixed"] == []
    assert pair["pass_at_k"]["1"]["delta"] == -1.0
    # the breakdowns partition the tasks: levels from the task set named in the contract
    levels = pair["breakdown"]["level"]
    assert [g["value"] for g in levels] == ["1", "2", "3", "4"] and sum(g["count"] for g in levels) == N
    for g in levels:
        ids = [r["task_id"] for r in pair["per_task"] if f"-l{g['value']}-" in r["task_id"]]
        assert g["count"] == len(ids) and g["mean_reward"]["delta"] == -1.0
    assert sum(g["count"] for g in pair["breakdown"]["split"]) == N
    assert {g["value"] for g in pair["breakdown"]["split"]} <= {"train", "dev", "heldout"}
    assert [(g["value"], g["count"]) for g in pair["breakdown"]["end_reason"]] == [
        ("terminated -> terminated", N)]
    # cost next to quality; a scripted policy reports no tokens and no prices: unknown, not zero
    ref_facts, wrong_facts = result["runs"]
    assert ref_facts["policy"]["name"] == "reference"
    assert wrong_facts["policy"]["name"] == "control:known_wrong"
    assert ref_facts["tokens"] is None and ref_facts["cost_per_solved_task"] is None
    assert ref_facts["solved_tasks"] == N and wrong_facts["solved_tasks"] == 0
    assert ref_facts["tool_s"] > 0 and ref_facts["episodes_per_s"] > 0
    assert [d["path"] for d in result["contracts"][0]["differences"]] == ["policy.name"]

    # the other way round every task is fixed
    back = compare([runs["wrong"], runs["ref"]])
    assert len(back["pairs"][0]["flipped"]["fixed"]) == N and back["pairs"][0]["mean_reward"]["delta"] == 1.0


def test_two_identical_runs_differ_in_nothing(runs):
    result = compare([runs["ref"], runs["same"]], labels=["first", "again"])
    (pair,) = result["pairs"]
    assert pair["mean_reward"]["delta"] == 0.0 and pair["mean_reward"]["ci"] == [0.0, 0.0]
    assert not pair["mean_reward"]["ci_excludes_zero"]
    assert pair["mcnemar"]["p_value"] == 1.0 and pair["mcnemar"]["both_pass"] == N
    assert pair["win_tie_loss"] == {"win": 0, "tie": N, "loss": 0}
    assert pair["flipped"] == {"fixed": [], "broken": []}
    assert result["contracts"][0]["differences"] == [] and result["warnings"] == []


def test_three_runs_give_every_pair(runs):
    result = compare([runs["ref"], runs["wrong"], runs["same"]])
    assert [(p["a"], p["b"]) for p in result["pairs"]] == [
        ("arith-reference", "arith-wrong"), ("arith-reference", "arith-reference-again"),
        ("arith-wrong", "arith-reference-again")]
    assert [p["mean_reward"]["delta"] for p in result["pairs"]] == [-1.0, 0.0, 1.0]


def _with_limits(src: Path, dst: Path, **limits) -> Path:
    shutil.copytree(src, dst)
    data = orjson.loads((dst / "contract.json").read_bytes())
    data.pop("contract_id")
    data["limits"] = {**data["limits"], **limits}
    (dst / "contract.json").write_bytes(RolloutContract(data).to_json())
    return dst


def test_runs_with_different_limits_are_refused_unless_allowed(runs, cli, tmp_path):
    other = _with_limits(runs["wrong"], tmp_path / "wrong-more-turns", max_turns=99)
    proc = cli("compare", str(runs["ref"]), str(other), "--out", str(tmp_path / "out"), check=False)
    assert proc.returncode == 2
    assert "not comparable" in proc.stderr and "limits.max_turns" in proc.stderr
    assert "--allow-differences" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "out" / "compare.json").exists()

    parity = tmp_path / "parity.toml"
    parity.write_text('[[allow]]\npath = "limits.max_turns"\nreason = "the candidate may take longer"\n')
    result = compare([runs["ref"], other], parity=parity)
    (diff,) = [d for d in result["contracts"][0]["differences"] if d["path"] == "limits.max_turns"]
    assert diff["reason"] == "the candidate may take longer" and not diff["blocking"]

    forced = compare([runs["ref"], other], allow_differences=True)
    assert any("limits.max_turns" in w for w in forced["warnings"])
    assert forced["pairs"][0]["mean_reward"]["delta"] == -1.0


def test_changed_task_content_is_refused(runs, tmp_path):
    changed = tmp_path / "changed"
    shutil.copytree(runs["wrong"], changed)
    jsonl = changed / "trajectories.jsonl"
    records = [orjson.loads(line) for line in jsonl.read_bytes().splitlines()]
    records[0]["task_hash"] = "0" * 16  # same id, different content
    jsonl.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    with pytest.raises(ComparisonError, match="task_hash"):
        compare([runs["ref"], changed])


def test_attempts_are_paired_and_missing_tasks_named(runs):
    ref, wrong = load_run(runs["ref"]), load_run(runs["wrong"])

    def two_attempts(run, second_reward):
        out = []
        for t in run.trajectories:
            out.append(t)
            second = dataclasses.replace(t, trajectory_id=t.trajectory_id + "-2",
                                         extra={**t.extra, "attempt": 1},
                                         verdict=dataclasses.replace(t.verdict, reward=second_reward))
            out.append(second)
        return dataclasses.replace(run, trajectories=out)

    a = two_attempts(ref, 1.0)
    b = two_attempts(wrong, 1.0)  # B solves every task on its second attempt only
    dropped = ref.trajectories[0].task_id
    b = dataclasses.replace(b, trajectories=[t for t in b.trajectories if t.task_id != dropped])
    result = compare([a, b], labels=["A", "B"])
    (pair,) = result["pairs"]
    assert pair["tasks"] == N - 1 and pair["episode_pairs"] == 2 * (N - 1)
    assert pair["only_a"] == [ref.trajectories[0].task_id] and pair["only_b"] == []
    assert any("1 task(s) only in A" in w for w in result["warnings"])
    assert pair["mean_reward"]["delta"] == pytest.approx(-0.5)
    assert pair["pass_at_k"]["1"]["delta"] == pytest.approx(-0.5)
    assert pair["pass_at_k"]["2"]["delta"] == pytest.approx(0.0)  # pass@2: both solve every task
    assert pair["mcnemar"]["a_only"] == N - 1 and pair["mcnemar"]["both_pass"] == N - 1
    # a pass rate of exactly one half is not "solved": the task counts as broken
    assert len(pair["flipped"]["broken"]) == N - 1


def test_cost_per_solved_task_when_prices_were_recorded(runs):
    ref = load_run(runs["ref"])
    priced = dataclasses.replace(ref, trajectories=[
        dataclasses.replace(t, extra={**t.extra, "cost": 0.25}) for t in ref.trajectories])
    result = compare([priced, runs["wrong"]], labels=["priced", "wrong"])
    facts = result["runs"][0]
    assert facts["cost"] == pytest.approx(0.25 * N) and facts["cost_per_solved_task"] == pytest.approx(0.25)
    assert result["runs"][1]["cost"] is None


def test_compare_needs_two_runs_and_a_shared_task(runs, tmp_path):
    with pytest.raises(ComparisonError, match="at least two runs"):
        compare([runs["ref"]])
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "trajectories.jsonl").write_bytes(b"")
    with pytest.raises(ComparisonError, match="share no task"):
        compare([runs["ref"], empty])


def test_compare_html_renders_in_chromium_with_no_external_request(runs, cli, tmp_path):
    # untrusted text from a run (its directory name) must stay text on the page
    hostile = tmp_path / PAYLOAD.replace("/", "_")
    shutil.copytree(runs["wrong"], hostile)
    out = tmp_path / "out"
    cli("compare", str(runs["ref"]), str(hostile), "--by", "level", "--out", str(out))
    html = (out / COMPARE_HTML).read_text()
    assert re.search(r'http-equiv="Content-Security-Policy" content="default-src \'none\';', html)
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:|//)""", html)
    assert "<img" not in html and "<b>bold</b>" not in html
    net_log = tmp_path / "net.json"
    shown = chromium(tmp_path, (out / COMPARE_HTML).as_uri(), f"--log-net-log={net_log}", "--dump-dom",
                     name="compare")
    console = [line for line in shown.stderr.splitlines() if ":CONSOLE" in line]
    assert console == [], console  # the stylesheet's hash matches: no CSP violation
    dom = shown.stdout
    for fig in ("plot-scatter-0", "plot-forest-0"):
        assert re.search(rf'<figure id="{fig}"><figcaption>[^<]+</figcaption><svg class="chart', dom), fig
    assert dom.count('<circle class="dot"') >= 1 + 1 + 4  # scatter; forest: mean, pass@1, 4 levels
    assert "McNemar exact p" in dom and "0 / 0 / 10" in dom and dom.count("broken: <code>") == N
    assert "&lt;img src=" in dom and "<img" not in dom
    assert page_requests(net_log) == []


def test_cli_errors_say_what_is_wrong(runs, cli, tmp_path):
    proc = cli("compare", str(runs["ref"]), str(tmp_path / "nope"), check=False)
    assert proc.returncode == 2 and "is not a run" in proc.stderr and "Traceback" not in proc.stderr
    proc = cli("compare", str(runs["ref"]), check=False)
    assert proc.returncode == 2 and "at least two runs" in proc.stderr
    (tmp_path / "file").write_text("")
    proc = cli("compare", str(runs["ref"]), str(runs["wrong"]), "--out", str(tmp_path / "file"), check=False)
    assert proc.returncode == 2 and "is a file" in proc.stderr
