"""report.html rendered in a real headless Chromium: plots, transcripts, no network, no XSS."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from urllib.parse import quote

import orjson
import pytest

from proofgym import ToolCallAction, TurnCompleteAction
from proofgym.eval import evaluate
from proofgym.eval.report import REPORT
from proofgym.rollout import ScriptedPolicy
from tests.conftest import require_tool

# Untrusted run content that would run script or load a URL if the page ever treated it as HTML.
PAYLOAD = '</script><img src="http://evil.invalid/x.png" onerror="document.title=\'pwned\'"><b>bold</b>'
FIGURES = ("plot-reward", "plot-passk", "plot-ends", "plot-time", "plot-tool-errors")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--host-resolver-rules=MAP * ~NOTFOUND", "--enable-logging=stderr", "--v=0")


class Mixed(ScriptedPolicy):
    """Odd episodes: a failing tool call carrying the payload, then the reference solution (1.0).
    Even episodes: a wrong answer carrying the payload (0.0)."""

    def __init__(self) -> None:
        self.calls = 0
        super().__init__(self._script, name="mixed")

    def _script(self, task):
        self.calls += 1
        if self.calls % 2:
            return [ToolCallAction("calculator", {"expression": PAYLOAD}), *task.reference_solution()]
        return [TurnCompleteAction(f"{PAYLOAD} \\boxed{{{task.wrong_answer}}}")]


def chromium(tmp_path: Path, url: str, *args: str, name: str = "run") -> subprocess.CompletedProcess:
    exe = require_tool("chromium")
    profile = tmp_path / f"profile-{name}"
    profile.mkdir()
    return subprocess.run([exe, *FLAGS, f"--user-data-dir={profile}", *args, url],
                          capture_output=True, text=True, timeout=180, check=True)


def page_requests(net_log: Path) -> list[str]:
    """URLs that a *document* asked for. Chromium's own background requests (update checks,
    account probes: initiator "not an origin") are not the page's and were refused by the host
    resolver rules anyway."""
    log = json.loads(net_log.read_text())
    start = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    return [e["params"]["url"] for e in log["events"]
            if e["type"] == start and "url" in e.get("params", {})
            and e["params"].get("initiator") != "not an origin"]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report") / "run"
    evaluate("proofgym/Arith-v0", Mixed(), episodes=4, repeats=2, out=out)
    return out


def test_report_renders_in_chromium_with_plots_transcripts_and_no_network(run, cli, tmp_path):
    (run / "contract.json").write_bytes(orjson.dumps(
        {"id": "c0ffee12", "model": {"name": "scripted"}, "limits": {"max_turns": 1}}))
    proc = cli("report", str(run))
    assert "wrote" in proc.stdout and "pass@k" in proc.stdout
    html = (run / REPORT).read_text()
    # self-contained: a strict CSP and no reference to anything outside the file
    assert re.search(r'http-equiv="Content-Security-Policy" content="default-src \'none\';', html)
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:|//)""", html)
    assert PAYLOAD not in html and "<img" not in html

    trajs = [orjson.loads(line) for line in (run / "trajectories.jsonl").read_bytes().splitlines()]
    passing = next(t for t in trajs if t["reward"] == 1.0)
    failing = next(t for t in trajs if t["reward"] == 0.0)
    url = (run / REPORT).as_uri()
    net_log = tmp_path / "net.json"
    shown = chromium(tmp_path, f"{url}#traj={quote(passing['trajectory_id'])}",
                     f"--log-net-log={net_log}", "--dump-dom", name="passing")
    dom = shown.stdout
    console = [line for line in shown.stderr.splitlines() if ":CONSOLE" in line]
    assert console == [], console  # no CSP violation (the page's own script/style hash), no JS error
    for fig in FIGURES:
        assert re.search(rf'<figure id="{fig}"><figcaption>[^<]+</figcaption><svg class="chart"', dom), fig
    assert "c0ffee12" in dom and "contract.json" in dom
    # the per-task table and the transcript list were rendered by the page's script
    assert dom.count('<button class="linkish"') == 4
    assert dom.count('<details class="traj"') == 8
    # the linked transcript is open and readable: prompt, tool call, tool error, answer, verdict
    opened = dom[dom.index(f'id="traj-{passing["trajectory_id"]}"'):]
    opened = opened[:opened.index("</details>")]
    assert "user · prompt" in opened and passing["prompt"][:40] in opened
    assert "assistant · tool call calculator" in opened and "tool error · " in opened
    assert "expression: \"" in opened  # arguments shown as name: value lines
    assert "tool output · calculator" in opened and "assistant · ends turn" in opened
    assert "verdict · scored · reward 1.000" in opened and "<td>correct</td>" in opened
    assert "<td>used_calculator</td>" in opened
    assert page_requests(net_log) == []

    shown = chromium(tmp_path, f"{url}#traj={quote(failing['trajectory_id'])}", "--dump-dom", name="failing")
    dom = shown.stdout
    opened = dom[dom.index(f'id="traj-{failing["trajectory_id"]}"'):]
    opened = opened[:opened.index("</details>")]
    assert "verdict · scored · reward 0.000" in opened
    # the payload is shown as text: escaped in the DOM, never an element
    assert "&lt;/script&gt;&lt;img src=\"http://evil.invalid/x.png\"" in opened
    assert "<img" not in dom and "<b>bold</b>" not in dom
    assert "<title>pwned</title>" not in dom

    shot = tmp_path / "report.png"  # the whole page, with the linked transcript open
    chromium(tmp_path, f"{url}#traj={quote(passing['trajectory_id'])}", f"--screenshot={shot}",
             "--window-size=1280,3600", name="shot")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


def test_the_network_check_can_fail(tmp_path):
    """The detector above sees a page that does load remote things (a control for the test)."""
    leaky = tmp_path / "leaky.html"
    leaky.write_text('<!doctype html><img src="http://example.invalid/p.png">'
                     '<script>fetch("https://api.example.invalid/y").catch(() => 0)</script>')
    net_log = tmp_path / "net.json"
    chromium(tmp_path, leaky.as_uri(), f"--log-net-log={net_log}", "--dump-dom")
    assert sorted(page_requests(net_log)) == ["http://example.invalid/p.png", "https://api.example.invalid/y"]


def test_a_10000_episode_report_is_paged(run, cli, tmp_path):
    records = [orjson.loads(line) for line in (run / "trajectories.jsonl").read_bytes().splitlines()]
    big = tmp_path / "big"
    big.mkdir()
    with (big / "trajectories.jsonl").open("wb") as f:
        for i in range(10_000):
            record = dict(records[i % len(records)])
            record["task_id"] = f"task-{i // 2:05d}"
            record["trajectory_id"] = f"task-{i // 2:05d}#{i % 2}"
            record["extra"] = {"attempt": i % 2}
            f.write(orjson.dumps(record) + b"\n")
    proc = cli("report", str(big))
    assert "10000 episodes" in proc.stdout
    dom = chromium(tmp_path, (big / REPORT).as_uri(), "--dump-dom").stdout
    assert dom.count('<details class="traj"') == 25  # one page of transcripts, not 10,000
    assert "page 1 of 400 · 10000 transcripts" in dom
    assert dom.count('<button class="linkish"') == 50 and "page 1 of 100 · 5000 tasks" in dom
    assert '<div class="transcript">' not in dom  # transcripts render only when opened
