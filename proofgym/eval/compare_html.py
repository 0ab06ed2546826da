"""``compare.html``: the comparison as one self-contained page.

Like ``report.html`` it loads nothing: a Content-Security-Policy of ``default-src 'none'`` with
the one inline stylesheet allowed by hash, no script at all, and inline SVG plots (per task, A
against B; each difference with its interval). Every string from the runs is escaped.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from html import escape
from typing import Any

from proofgym.eval import plots
from proofgym.eval.html_page import asset, page_head
from proofgym.version import __version__

COMPARE_HTML = "compare.html"

_EXTRA_CSS = """
svg .dot { fill: var(--blue); fill-opacity: .55; } svg .diag { stroke: #b8c0cc; stroke-dasharray: 4 3; }
svg .ci { stroke: var(--fg); stroke-width: 2; } svg .zero { stroke: var(--red); stroke-dasharray: 3 3; }
svg .axis { stroke: #8a93a0; } svg.square { max-width: 380px; margin: 0 auto; }
.sig { color: var(--green); font-weight: 600; } .flip-fixed { color: var(--green); }
.flip-broken { color: var(--red); }
"""


def _f(value: Any, digits: int = 3) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:+.{digits}f}" if digits < 0 else f"{value:.{digits}f}"
    return str(value)


def _signed(value: float | None) -> str:
    return "—" if value is None else f"{value:+.3f}"


def _ci(d: dict[str, Any]) -> str:
    ci = d.get("ci")
    return "—" if not ci else f"[{ci[0]:+.3f}, {ci[1]:+.3f}]"


def scatter(points: Sequence[tuple[str, float, float]], *, label: str, a: str, b: str) -> str:
    """Each task as a dot at (A's mean reward, B's): above the diagonal B did better. Rewards are
    drawn on [0, 1] (clipped), the usual range of a verifier's reward."""
    size, pad = 300, 40
    span = size - 2 * pad

    def pos(v: float) -> float:
        return pad + max(0.0, min(1.0, v)) * span

    counts: dict[tuple[float, float], list[str]] = {}
    for task, x, y in points:
        counts.setdefault((round(x, 3), round(y, 3)), []).append(task)
    body = [f'<line class="axis" x1="{pad}" y1="{size - pad}" x2="{size - pad}" y2="{size - pad}"/>',
            f'<line class="axis" x1="{pad}" y1="{pad}" x2="{pad}" y2="{size - pad}"/>',
            f'<line class="diag" x1="{pad}" y1="{size - pad}" x2="{size - pad}" y2="{pad}"/>',
            f'<text x="{size / 2}" y="{size - 8}" text-anchor="middle">{escape(a)} (A)</text>',
            f'<text x="12" y="{size / 2}" text-anchor="middle" transform="rotate(-90 12 {size / 2})">'
            f"{escape(b)} (B)</text>",
            f'<text class="small" x="{pad}" y="{size - pad + 14}" text-anchor="middle">0</text>',
            f'<text class="small" x="{size - pad}" y="{size - pad + 14}" text-anchor="middle">1</text>',
            f'<text class="small" x="{pad - 6}" y="{pad + 4}" text-anchor="end">1</text>']
    for (x, y), tasks in sorted(counts.items()):
        radius = 4 + min(10.0, 2 * (len(tasks) - 1) ** 0.5)
        title = f"{len(tasks)} task(s): " + ", ".join(tasks[:10]) + (" …" if len(tasks) > 10 else "")
        body.append(f'<circle class="dot" cx="{pos(x):.1f}" cy="{size - pos(y):.1f}" r="{radius:.1f}">'
                    f"<title>{escape(title)}</title></circle>")
    return (f'<svg class="chart square" viewBox="0 0 {size} {size}" role="img" aria-label="{escape(label)}" '
            f'xmlns="http://www.w3.org/2000/svg"><title>{escape(label)}</title>{"".join(body)}</svg>')


def forest(rows: Sequence[tuple[str, dict[str, Any]]], *, label: str) -> str:
    """One row per comparison: the mean difference (B − A) as a dot and its interval as a line,
    on a symmetric axis around zero."""
    if not rows:
        return plots._empty(label, "nothing to show")
    width, left, right, row_h = plots.WIDTH, 170, 110, 26
    extent = max([1e-9] + [abs(v) for _, d in rows for v in [d["delta"], *(d.get("ci") or [])]])
    span = width - left - right

    def pos(v: float) -> float:
        return left + (v / extent + 1) / 2 * span

    height = 30 + len(rows) * row_h
    body = [f'<line class="zero" x1="{pos(0):.1f}" y1="4" x2="{pos(0):.1f}" y2="{height - 22}"/>',
            f'<text class="small" x="{left}" y="{height - 6}" text-anchor="middle">{-extent:+.2f}</text>',
            f'<text class="small" x="{pos(0):.1f}" y="{height - 6}" text-anchor="middle">0</text>',
            f'<text class="small" x="{left + span}" y="{height - 6}" '
            f'text-anchor="middle">{extent:+.2f}</text>']
    for i, (name, d) in enumerate(rows):
        y = 16 + i * row_h
        body.append(f'<text x="{left - 8}" y="{y + 4}" text-anchor="end">{escape(plots._short(name, 24))}'
                    f"<title>{escape(name)}</title></text>")
        ci = d.get("ci")
        if ci:
            body.append(f'<line class="ci" x1="{pos(ci[0]):.1f}" y1="{y}" x2="{pos(ci[1]):.1f}" y2="{y}"/>')
        body.append(f'<circle class="dot" cx="{pos(d["delta"]):.1f}" cy="{y}" r="5"/>'
                    f'<text x="{left + span + 8}" y="{y + 4}">{escape(_signed(d["delta"]))}</text>')
    return plots._svg(height, "".join(body), label)


def _runs_table(result: dict[str, Any]) -> str:
    head = ("<tr><th>run</th><th>policy</th><th class=num>episodes</th><th class=num>tasks</th>"
            "<th class=num>mean reward</th><th class=num>pass rate</th><th class=num>tokens in / out</th>"
            "<th class=num>model s</th><th class=num>tool s</th><th class=num>episodes/s</th>"
            "<th class=num>cost / solved task</th><th>end reasons</th></tr>")
    body = []
    for r in result["runs"]:
        tokens = r.get("tokens")
        policy = r.get("policy") or {}
        token_text = f"{tokens['in']:,} / {tokens['out']:,}" if tokens else "—"
        body.append(
            f"<tr><td>{escape(r['label'])}</td>"
            f"<td><code>{escape(str(policy.get('name', policy) if isinstance(policy, dict) else policy))}"
            f"</code></td><td class=num>{r['episodes']}</td><td class=num>{r['tasks']}</td>"
            f"<td class=num>{_f(r['mean_reward'])}</td><td class=num>{_f(r['pass_rate'])}</td>"
            f"<td class=num>{escape(token_text)}</td>"
            f"<td class=num>{r['model_s']:.2f}</td><td class=num>{r['tool_s']:.2f}</td>"
            f"<td class=num title=\"{escape(r['episodes_per_s_basis'])}\">{_f(r['episodes_per_s'], 1)}</td>"
            f"<td class=num>{_f(r['cost_per_solved_task'], 4)}</td>"
            f"<td>{escape(', '.join(f'{k} {v}' for k, v in r['end_reasons'].items()))}</td></tr>")
    return f"<table class=compact><thead>{head}</thead><tbody>{''.join(body)}</tbody></table>"


def _contracts(result: dict[str, Any]) -> str:
    parts = []
    for c in result["contracts"]:
        rows = "".join(
            f"<tr><td>{'blocking' if d['blocking'] else 'allowed' if d['reason'] else 'differs'}</td>"
            f"<td><code>{escape(d['path'])}</code></td><td><code>{escape(repr(d['a']))}</code></td>"
            f"<td><code>{escape(repr(d['b']))}</code></td><td>{escape(d['reason'] or '')}</td></tr>"
            for d in c["differences"])
        ids = f"{c['contract_a'] or 'none'} vs {c['contract_b'] or 'none'}"
        table = (f"<table class=compact><thead><tr><th></th><th>setting</th><th>A</th><th>B</th>"
                 f"<th>reason</th></tr></thead><tbody>{rows}</tbody></table>" if rows
                 else "<p class=muted>identical contracts</p>")
        parts.append(f"<h3>{escape(c['a'])} vs {escape(c['b'])} <span class=muted>({escape(ids)})</span>"
                     f"</h3>{table}")
    return "".join(parts)


def _pair(p: dict[str, Any], result: dict[str, Any], index: int) -> str:
    d, m, w = p["mean_reward"], p["mcnemar"], p["win_tie_loss"]
    alpha = 1 - result["confidence"]
    sig = m["p_value"] < alpha
    conf = round(100 * result["confidence"])
    cards = "".join([
        f'<div class="card primary"><div class="card-title">mean reward B − A</div><div class="card-value">'
        f'{escape(_signed(d["delta"]))}</div><div class="card-note">{conf}% paired CI {escape(_ci(d))} · '
        f'{d["n"]} tasks · A {d["mean_a"]:.3f}, B {d["mean_b"]:.3f}</div></div>',
        f'<div class="card"><div class="card-title">McNemar exact p</div><div class="card-value'
        f'{" sig" if sig else ""}">{m["p_value"]:.3g}</div><div class="card-note">{m["a_only"]} pass only '
        f'in A · {m["b_only"]} only in B · {m["both_pass"] + m["neither"]} agree</div></div>',
        f'<div class="card"><div class="card-title">tasks win / tie / loss (B)</div><div class="card-value">'
        f'{w["win"]} / {w["tie"]} / {w["loss"]}</div><div class="card-note">by mean reward per task'
        f'</div></div>',
        f'<div class="card"><div class="card-title">flipped tasks</div><div class="card-value">'
        f'{len(p["flipped"]["fixed"]) + len(p["flipped"]["broken"])}</div><div class="card-note">'
        f'{len(p["flipped"]["fixed"])} fixed by B · {len(p["flipped"]["broken"])} broken by B</div></div>'])
    diffs = [(f"mean reward ({p['tasks']} tasks)", d)] + [
        (f"pass@{k} ({v['n']} tasks)", v) for k, v in p["pass_at_k"].items()]
    for key, groups in p["breakdown"].items():
        diffs += [(f"{key}={g['value']} ({g['count']})", g["mean_reward"])
                  for g in groups if "mean_reward" in g]
    dots = scatter([(r["task_id"], r["a"], r["b"]) for r in p["per_task"]], label="per-task A vs B",
                   a=p["a"], b=p["b"])
    figures = (f'<figure id="plot-scatter-{index}"><figcaption>Per task: mean reward of A vs B '
               f"(above the diagonal: B better)</figcaption>"
               f"{dots}"
               f'</figure><figure id="plot-forest-{index}"><figcaption>Difference B − A with {conf}% paired '
               f"bootstrap interval</figcaption>{forest(diffs, label='differences with intervals')}</figure>")
    flips = "".join(f'<li class="flip-fixed">fixed: <code>{escape(t)}</code></li>'
                    for t in p["flipped"]["fixed"])
    flips += "".join(f'<li class="flip-broken">broken: <code>{escape(t)}</code></li>'
                     for t in p["flipped"]["broken"])
    breakdown = "".join(_breakdown_table(k, g) for k, g in p["breakdown"].items())
    tasks = "".join(f"<tr><td><code>{escape(r['task_id'])}</code></td><td class=num>{r['a']:.3f}</td>"
                    f"<td class=num>{r['b']:.3f}</td><td class=num>{r['delta']:+.3f}</td></tr>"
                    for r in sorted(p["per_task"], key=lambda r: (r["delta"], r["task_id"])))
    only = ""
    if p["only_a"] or p["only_b"]:
        only = (f"<p class=warning>{len(p['only_a'])} task(s) only in {escape(p['a'])}, "
                f"{len(p['only_b'])} only in {escape(p['b'])}: left out of the pairing</p>")
    return (f'<section id="pair-{index}"><h2>{escape(p["a"])} (A) vs {escape(p["b"])} (B)</h2>{only}'
            f'<div class="cards">{cards}</div><div class="plots">{figures}</div>'
            f"<h3>Flipped tasks</h3><ul>{flips or '<li class=muted>none</li>'}</ul>{breakdown}"
            f"<details><summary>Every task ({len(p['per_task'])})</summary><table class=compact><thead>"
            f"<tr><th>task</th><th class=num>A</th><th class=num>B</th><th class=num>B − A</th></tr></thead>"
            f"<tbody>{tasks}</tbody></table></details></section>")


def _breakdown_table(key: str, groups: list[dict[str, Any]]) -> str:
    rows = []
    for g in groups:
        if "mean_reward" not in g:
            rows.append(f"<tr><td>{escape(g['value'])}</td><td class=num>{g['count']}</td>"
                        "<td colspan=5 class=muted>unscored: no pair</td></tr>")
            continue
        d, w, m = g["mean_reward"], g["win_tie_loss"], g["mcnemar"]
        rows.append(f"<tr><td>{escape(g['value'])}</td><td class=num>{g['count']}</td>"
                    f"<td class=num>{d['mean_a']:.3f}</td><td class=num>{d['mean_b']:.3f}</td>"
                    f"<td class=num>{escape(_signed(d['delta']))} {escape(_ci(d))}</td>"
                    f"<td class=num>{w['win']} / {w['tie']} / {w['loss']}</td>"
                    f"<td class=num>{m['p_value']:.3g}</td></tr>")
    return (f"<h3>By {escape(key)}</h3><table class=compact><thead><tr><th>{escape(key)}</th>"
            "<th class=num>count</th><th class=num>A</th><th class=num>B</th><th class=num>B − A [CI]</th>"
            "<th class=num>win / tie / loss</th><th class=num>McNemar p</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>")


def render_compare(result: dict[str, Any]) -> str:
    """The page for a :func:`proofgym.eval.compare.compare` result."""
    css = asset("report.css") + _EXTRA_CSS
    names = " vs ".join(r["label"] for r in result["runs"])
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    warnings = "".join(f"<p class=warning>{escape(w)}</p>" for w in result["warnings"])
    pairs = "".join(_pair(p, result, i) for i, p in enumerate(result["pairs"]))
    nav = "".join(f'<a href="#pair-{i}">{escape(p["a"])} vs {escape(p["b"])}</a>'
                  for i, p in enumerate(result["pairs"]))
    return page_head(f"{names} · proofgym compare", css) + f"""<header><h1>{escape(names)}</h1>
<p class="sub">paired by task and attempt · success = reward ≥ {result['pass_threshold']:g} ·
proofgym {escape(__version__)} · generated {generated}</p>
<nav><a href="#runs">Quality and cost</a><a href="#contracts">Contracts</a>{nav}</nav></header>
<main>{warnings}
<section id="runs"><h2>Quality and cost</h2>{_runs_table(result)}</section>
<section id="contracts"><h2>Contracts</h2>{_contracts(result)}</section>
{pairs}
</main>
</body></html>
"""
