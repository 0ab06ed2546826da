"""``report.html``: one self-contained page a person reads instead of grepping JSONL.

The page holds the run's contract, the headline numbers, inline SVG plots, a per-task table and
every trajectory as a readable transcript. It loads nothing: no network, no external scripts,
fonts or stylesheets, and a Content-Security-Policy (``default-src 'none'``, the one inline
script and stylesheet allowed by hash) makes the browser refuse anything else. Transcripts are
embedded as JSON and rendered on demand, a page at a time, so a 10,000-episode run stays usable.
Everything from the run (tool outputs, messages, ids) is untrusted: Python escapes it into HTML,
the JSON is escaped so it cannot close its ``<script>`` element, and the page's script only ever
inserts it as text.
"""

from __future__ import annotations

from datetime import datetime, timezone
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson

from proofgym.core import ToolCallAction, TurnCompleteAction
from proofgym.eval import plots
from proofgym.eval.html_page import asset, page_head
from proofgym.eval.metrics import end_reason, summary_of
from proofgym.record import Trajectory
from proofgym.record.rundir import CONTRACT, RunRecord, contract_id_of, load_run, read_json, write_atomic
from proofgym.version import __version__

REPORT = "report.html"

#: Longest text kept per message or tool output in the page (the JSONL keeps everything).
MAX_TEXT = 20_000


def _cut(text: Any) -> str:
    text = text if isinstance(text, str) else orjson.dumps(text, default=repr).decode()
    if len(text) <= MAX_TEXT:
        return text
    return text[:MAX_TEXT] + f"\n… [{len(text) - MAX_TEXT} more characters in trajectories.jsonl]"


def transcript(traj: Trajectory) -> dict[str, Any]:
    """The compact form of one trajectory that the page's script renders."""
    steps = []
    for s in traj.steps:
        obs = s.observation
        step: dict[str, Any] = {"t": str(obs.get("type", "")), "o": _cut(obs.get("observation", ""))}
        if isinstance(s.action, ToolCallAction):
            step.update(k="call", n=s.action.tool_name, a=_cut(s.action.tool_input))
        elif isinstance(s.action, TurnCompleteAction):
            step.update(k="msg", m=_cut(s.action.message))
        if "error_kind" in s.info:
            step["e"] = str(s.info["error_kind"])
        if s.usage:
            step["u"] = s.usage
        steps.append(step)
    verdict = traj.verdict.to_dict() if traj.verdict is not None else None
    return {"id": traj.trajectory_id, "task": traj.task_id, "attempt": traj.extra.get("attempt"),
            "seed": traj.seed, "reward": traj.reward, "status": traj.status, "end": end_reason(traj),
            "error": traj.error, "verdict": verdict, "steps": steps,
            "time": {k: round(v, 4) for k, v in traj.timings.items()}}


def _json_for_script(data: Any) -> str:
    # Inside <script type="application/json"> only "</script" or "<!--" could end the element; with
    # every <, > and & escaped (valid JSON string escapes) no run content can.
    text = orjson.dumps(data, default=repr).decode()
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def _card(title: str, value: str, note: str = "", cls: str = "") -> str:
    return (f'<div class="card {cls}"><div class="card-title">{escape(title)}</div>'
            f'<div class="card-value">{escape(value)}</div>'
            f'<div class="card-note">{escape(note)}</div></div>')


def _headline(s: dict[str, Any]) -> str:
    ci = s.get("mean_reward_ci")
    ci_note = (f"{int(100 * s.get('ci_confidence', 0.95))}% CI {ci[0]:.3f} – {ci[1]:.3f}"
               if ci else "no scored episodes")
    pass_k = s.get("pass_at_k") or {}
    k_max = max((int(k) for k in pass_k), default=0)
    tokens = s.get("tokens")
    time = s.get("time") or {}
    cards = [
        _card("mean reward", _fmt(s.get("mean_reward")), ci_note, "primary"),
        _card("mean reward, errors as 0", _fmt(s.get("mean_reward_all")),
              f"error rate {_pct(s.get('error_rate'))}", "bad" if s.get("error_rate") else ""),
        _card("pass@1", _fmt(pass_k.get("1")), f"success = reward ≥ {s.get('pass_threshold', 1.0):g}"),
        _card(f"pass@{k_max}" if k_max > 1 else "pass@k", _fmt(pass_k.get(str(k_max))) if k_max > 1 else "—",
              f"over {s.get('pass_at_k_tasks', {}).get(str(k_max), 0)} tasks" if k_max > 1
              else "one attempt per task"),
        _card("episodes", f"{s.get('episodes', 0)}",
              f"{s.get('scored', 0)} scored · {s.get('tasks', 0)} tasks"),
        _card("terminated", _pct(s.get("terminated_rate")), f"truncated {_pct(s.get('truncated_rate'))}"),
        _card("grader errors", str(s.get("verify_errors", 0)), f"episode errors {s.get('episode_errors', 0)}",
              "bad" if s.get("verify_errors") or s.get("episode_errors") else ""),
        _card("tool calls", str(s.get("tool_calls", 0)),
              f"{sum((s.get('tool_errors') or {}).values())} errors"),
        _card("tokens in / out", f"{tokens['in']:,} / {tokens['out']:,}" if tokens else "—",
              f"{tokens['episodes_with_usage']} episodes reported usage" if tokens
              else "the policy reported no usage"),
        _card("policy versions", ", ".join((s.get("policy_versions") or {}).get("versions") or {}) or "—",
              _age_note(s.get("policy_versions") or {})),
        _card("time, summed over episodes", plots.seconds(time.get("total_s", 0.0)),
              f"model {plots.seconds(time.get('policy_s', 0.0))} · tools "
              f"{plots.seconds(time.get('env_s', 0.0))} · verify {plots.seconds(time.get('verify_s', 0.0))}"
              + (f" · grader start-up {plots.seconds(time['verifier_startup_s'])} (once per run, apart)"
                 if time.get("verifier_startup_s") is not None else "")),
    ]
    return f'<div class="cards">{"".join(cards)}</div>'


def _age_note(versions: dict[str, Any]) -> str:
    if versions.get("current") is None:
        return "trajectory age needs integer versions (training steps)"
    return (f"age vs {versions['current']}: max {versions['max_age']}, "
            f"mean {versions['mean_age']:.1f} steps")


def _figure(fig_id: str, caption: str, svg: str) -> str:
    return f'<figure id="{fig_id}"><figcaption>{escape(caption)}</figcaption>{svg}</figure>'


def _plots(s: dict[str, Any], rewards: list[float]) -> str:
    pass_k = s.get("pass_at_k") or {}
    tasks_k = s.get("pass_at_k_tasks") or {}
    ks = sorted(int(k) for k in pass_k)
    ends = s.get("end_reasons") or {}
    time = s.get("time") or {}
    parts = [(n, time.get(k, 0.0)) for n, k in (("model", "policy_s"), ("tools", "env_s"),
                                               ("verification", "verify_s"))]
    if time.get("verifier_startup_s") is not None:  # once per run: its own bar, not "verification"
        parts.append(("grader start-up", time["verifier_startup_s"]))
    spent = sum(v for _, v in parts) or 1.0
    errors = s.get("tool_errors") or {}
    calls = s.get("tool_calls", 0)
    end_cls = ["bar ok" if k == "terminated" else "bar bad" if k == "error" else "bar warn" for k in ends]
    return "".join([
        _figure("plot-reward", "Reward distribution (scored episodes)", plots.vbars(
            plots.histogram_bins(rewards), label="reward distribution", x_label="reward",
            y_label="episodes", empty="no scored episodes")),
        _figure("plot-passk", "pass@k (unbiased estimator, averaged over tasks)", plots.line(
            [(k, pass_k[str(k)]) for k in ks], label="pass@k", x_label="k (attempts)",
            annotations=[f"{tasks_k.get(str(k), 0)} tasks" for k in ks],
            empty="no scored attempts")),
        _figure("plot-ends", "How episodes ended", plots.hbars(
            [(k, v, _pct(v)) for k, v in ends.items()], label="termination and truncation reasons",
            max_value=1.0, classes=end_cls, empty="no episodes")),
        _figure("plot-time", "Where the time went (summed over episodes; grading may overlap)", plots.hbars(
            [(n, v, f"{plots.seconds(v)} · {100 * v / spent:.0f}%") for n, v in parts],
            label="time breakdown", empty="no timings")),
        _figure("plot-tool-errors", f"Tool errors by kind ({calls} tool calls)", plots.hbars(
            [(k, v, f"{v} · {100 * v / calls:.1f}%" if calls else str(v)) for k, v in errors.items()],
            label="tool errors", classes=["bar bad"] * len(errors),
            empty=f"no tool errors in {calls} tool calls")),
    ])


def _rubric(s: dict[str, Any]) -> str:
    rows = [("component", k, v) for k, v in (s.get("components") or {}).items()]
    rows += [("metric", k, v) for k, v in (s.get("metrics") or {}).items()]
    if not rows:
        return '<p class="muted">The grader reported no components or metrics.</p>'
    body = "".join(f"<tr><td>{escape(kind)}</td><td>{escape(name)}</td><td class=num>{value:.3f}</td></tr>"
                   for kind, name, value in rows)
    return ("<table class=compact><thead><tr><th>kind</th><th>name</th><th class=num>mean</th></tr></thead>"
            f"<tbody>{body}</tbody></table>")


def _contract(run: RunRecord, trajectories: list[Trajectory]) -> str:
    ids = sorted({c for c in (contract_id_of(t) for t in trajectories) if c})
    if run.contract is not None and not ids:
        own = run.contract.get("contract_id") or run.contract.get("id")
        ids = [str(own)] if own else []
    id_text = ", ".join(ids) if ids else "none recorded"
    if run.contract is None:
        return (f'<p>Contract id: <code>{escape(id_text)}</code>. <span class="muted">This run '
                "directory has no <code>contract.json</code>.</span></p>")
    pretty = orjson.dumps(run.contract, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode()
    keys = ", ".join(escape(k) for k in sorted(run.contract))
    return (f"<p>Contract id: <code>{escape(id_text)}</code></p><p class=muted>Fields: {keys}</p>"
            f"<details><summary>contract.json</summary><pre>{escape(pretty)}</pre></details>")


def _audit(run: RunRecord) -> str:
    """The Audit section, from ``RUN/audit.json`` (written by ``proofgym audit``): each flagged
    trajectory, its families and findings, linked to its transcript."""
    path = Path(run.path) / "audit.json"
    if not path.is_file():
        return ""
    try:
        audit = orjson.loads(path.read_bytes())
        flagged = list(audit["trajectories_flagged"])
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return '<section id="audit"><h2>Audit</h2><p class="warning">audit.json is unreadable; run ' \
               "<code>proofgym audit</code> again</p></section>"
    rows = []
    for entry in flagged:
        tid = str(entry.get("trajectory_id", ""))
        findings = "<br>".join(f"{escape(str(f.get('family')))}: {escape(str(f.get('where')))}: "
                               f"<code>{escape(str(f.get('evidence')))}</code>"
                               for f in entry.get("findings", []))
        anchor = quote(tid, safe="")
        rows.append(f'<tr><td><a href="#traj={anchor}">{escape(tid)}</a></td>'
                    f"<td class=num>{_fmt(entry.get('reward'))}</td><td>{findings}</td></tr>")
    head = (f"<p>{audit.get('audited')} of {audit.get('trajectories')} trajectories audited (reward &ge; "
            f"{escape(str(audit.get('min_reward')))}), {len(flagged)} flagged. A flag is a signature to "
            "read, not a verdict.</p>")
    table = ("<table><thead><tr><th>trajectory</th><th class=num>reward</th><th>findings</th></tr></thead>"
             f"<tbody>{''.join(rows)}</tbody></table>") if rows else ""
    return f'<section id="audit"><h2>Audit</h2>{head}{table}</section>'


def render_report(run: RunRecord, summary: dict[str, Any] | None = None) -> str:
    """The report page of ``run`` as a string (``summary`` defaults to :func:`summary_of` it)."""
    trajs = run.trajectories
    s = summary if summary is not None else summary_of(run)
    env_id = s.get("env_id") or next((t.env_id for t in trajs if t.env_id), "") or "run"
    policy = s.get("policy") or (trajs[0].policy if trajs else {})
    policy_name = policy.get("name", "?") if isinstance(policy, dict) else str(policy)
    title = f"{env_id} · policy {policy_name}"
    data = {"tasks": s.get("per_task") or [], "threshold": s.get("pass_threshold", 1.0),
            "prompts": {t.task_id: _cut(t.prompt) for t in trajs},
            "trajectories": [transcript(t) for t in trajs]}
    css, js = asset("report.css"), asset("report.js")
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    tools = sorted({str(tool.get("function", {}).get("name", "?")) for t in trajs[:1] for tool in t.tools})
    figures = _plots(s, [t.reward for t in trajs if t.reward is not None])
    # run-level warnings (e.g. an evaluation on the train split) belong above every number
    notes = [str(w) for w in s.get("warnings") or []]
    notes += [f"{len(run.skipped_lines)} torn line(s) at the end of trajectories.jsonl were skipped"
              for _ in [0] if run.skipped_lines]
    banner = "".join(f'<p class="warning">{escape(n)}</p>' for n in notes)
    split = f" · split {escape(str(s['split']))}" if s.get("split") else ""
    audit = _audit(run)
    audit_link = '<a href="#audit">Audit</a>' if audit else ""
    return page_head(f"{title} · proofgym report", css, js) + f"""<header><h1>{escape(title)}</h1>
<p class="sub">{len(trajs)} episodes{split} · {escape(str(run.path))}
 · tools: {escape(", ".join(tools) or "none")}
 · policy <code>{escape(orjson.dumps(policy, default=repr).decode())}</code>
 · proofgym {escape(__version__)} · report generated {generated}</p>
<nav><a href="#headline">Numbers</a><a href="#contract">Contract</a><a href="#plots">Plots</a>
<a href="#rubric">Rubric</a><a href="#tasks">Tasks</a>{audit_link}
<a href="#transcripts">Transcripts</a></nav></header>
<main>{banner}
<section id="headline"><h2>Headline numbers</h2>{_headline(s)}</section>
<section id="contract"><h2>Contract</h2>{_contract(run, trajs)}</section>
<section id="plots"><h2>Plots</h2><div class="plots">{figures}</div></section>
<section id="rubric"><h2>Rubric components and metrics</h2>{_rubric(s)}</section>
<section id="tasks"><h2>Tasks</h2><div id="task-controls" class="controls"></div>
<table id="task-table"><thead><tr><th>task</th><th class=num>attempts</th><th class=num>scored</th>
<th class=num>successes</th><th class=num>mean reward</th><th class=num>best</th><th class=num>errors</th>
<th class=num>truncated</th></tr></thead><tbody></tbody></table>
<div id="task-pager" class="pager"></div></section>
{audit}
<section id="transcripts"><h2>Transcripts</h2><div id="traj-controls" class="controls"></div>
<div id="traj-list"></div><div id="traj-pager" class="pager"></div>
<noscript><p>Transcripts are rendered by the page's inline script; enable JavaScript for this file,
or read trajectories.jsonl.</p></noscript></section>
</main>
<script type="application/json" id="pg-data">{_json_for_script(data)}</script>
<script>{js}</script>
</body></html>
"""


def write_report(run_dir: str | Path, *, trajectories: list[Trajectory] | None = None,
                 summary: dict[str, Any] | None = None, out: str | Path | None = None) -> Path:
    """Write ``report.html`` into ``run_dir`` (or to ``out``); reads the run from disk unless its
    trajectories are given. Returns the path written."""
    run_dir = Path(run_dir)
    if trajectories is None:
        run = load_run(run_dir)
    else:
        run = RunRecord(run_dir, list(trajectories), summary, read_json(run_dir / CONTRACT))
    target = Path(out) if out is not None else run.path / REPORT
    write_atomic(target, render_report(run, summary).encode("utf-8"))  # never left half-written
    return target
