"""report.html content without a browser: escaping, run warnings, the contract, torn lines."""

from __future__ import annotations

import json
import re

import orjson

from proofgym import TurnCompleteAction
from proofgym.eval import evaluate
from proofgym.eval.report import MAX_TEXT, REPORT, render_report
from proofgym.record.rundir import load_run
from proofgym.rollout import ScriptedPolicy


def _data(html: str) -> dict:
    """The JSON the page's script renders from."""
    match = re.search(r'<script type="application/json" id="pg-data">(.*?)</script>', html, re.S)
    assert match is not None
    return json.loads(match.group(1))


def test_embedded_json_cannot_close_its_script_and_round_trips(tmp_path):
    payload = "</script><script>alert(1)</script><!-- & -->"
    evaluate("proofgym/Guess-v0", ScriptedPolicy([TurnCompleteAction(payload)]), episodes=1, out=tmp_path)
    html = (tmp_path / REPORT).read_text()
    assert html.count("</script>") == 2  # the data element's and the script's own, nothing injected
    assert "<!--" not in html
    data = _data(html)
    (traj,) = data["trajectories"]
    assert traj["steps"][0]["m"] == payload  # the exact text survives, as data
    assert traj["verdict"]["status"] == "scored" and traj["reward"] == 0.0
    assert data["prompts"][traj["task"]].startswith("I am thinking of an integer")


def test_warnings_contract_and_torn_last_line_are_shown(tmp_path):
    evaluate("proofgym/Arith-v0", ScriptedPolicy([TurnCompleteAction("x" * (MAX_TEXT + 50))]),
             episodes=2, out=tmp_path)
    with (tmp_path / "trajectories.jsonl").open("ab") as f:
        f.write(b'{"trajectory_id": "half-writt')  # a crash mid-write
    contract = {"contract_id": "abc123", "limits": {"max_turns": 1}}
    (tmp_path / "contract.json").write_bytes(orjson.dumps(contract))
    run = load_run(tmp_path)
    assert len(run.trajectories) == 2 and run.skipped_lines == [3]
    html = render_report(run, {"warnings": ["EVALUATING ON THE TRAIN SPLIT <b>"], "split": "train"})
    assert '<p class="warning">EVALUATING ON THE TRAIN SPLIT &lt;b&gt;</p>' in html
    assert "torn line(s)" in html and "· split train" in html
    assert "abc123" in html and "&quot;max_turns&quot;: 1" in html
    message = _data(html)["trajectories"][0]["steps"][0]["m"]
    assert message.startswith("x" * MAX_TEXT) and "50 more characters in trajectories.jsonl" in message


def test_eval_and_report_commands_print_the_metrics_and_write_the_page(cli, tmp_path):
    out = tmp_path / "run"
    proc = cli("eval", "proofgym/Guess-v0", "-n", "3", "--policy", "reference", "--out", str(out))
    assert "pass@k" in proc.stdout and "@1 1.0000" in proc.stdout
    assert "95% CI 1.0000 – 1.0000" in proc.stdout and "report.html" in proc.stdout
    first = (out / REPORT).read_text()
    (out / REPORT).unlink()
    proc = cli("report", str(out), "--out", str(tmp_path / "again.html"))
    assert f"wrote {tmp_path / 'again.html'}" in proc.stdout
    again = (tmp_path / "again.html").read_text()
    strip = re.compile(r"report generated [^<]+")  # the only line that may differ
    assert strip.sub("", first).replace(str(out), "") == strip.sub("", again).replace(str(out), "")
    missing = cli("report", str(tmp_path / "nowhere"), check=False)
    assert missing.returncode == 2 and "no trajectories.jsonl" in missing.stdout


def test_continuous_rewards_are_binned_and_an_empty_run_still_renders(tmp_path):
    from proofgym.eval.plots import histogram_bins, seconds

    rewards = [i / 99 for i in range(100)]  # 100 distinct values in [0, 1]
    bins = histogram_bins(rewards)
    assert len(bins) == 10 and sum(count for _, count in bins) == 100
    assert [count for _, count in bins] == [10.0] * 10
    assert histogram_bins([0.0, 1.0, 1.0]) == [("0", 1.0), ("1", 2.0)]
    assert (seconds(0.25), seconds(12.34), seconds(245)) == ("250 ms", "12.3 s", "4 min 05 s")

    (tmp_path / "trajectories.jsonl").write_bytes(b"")
    html = render_report(load_run(tmp_path))
    data = _data(html)
    assert data["trajectories"] == [] and "no scored episodes" in html and "no episodes" in html
