"""The metrics table printed by ``proofgym eval`` and ``proofgym report``."""

from __future__ import annotations

from typing import Any

from rich.table import Table

#: pass@k values shown inline in the table (the rest are in summary.json and the report).
SHOWN_K = 8


def _num(value: Any) -> str:
    if value is None:
        return "—"
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def _rates(rates: dict[str, float]) -> str:
    return ", ".join(f"{k} {100 * v:.1f}%" for k, v in rates.items()) or "—"


def _means(means: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.3f}" for k, v in means.items()) or "—"


def summary_rows(s: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, value) rows of a summary, in reading order."""
    ci = s.get("mean_reward_ci")
    pass_k = s.get("pass_at_k") or {}
    shown = list(pass_k.items())[:SHOWN_K]
    tokens = s.get("tokens")
    time = s.get("time") or {}
    rows = [
        ("episodes", f"{s.get('episodes', 0)} ({s.get('scored', 0)} scored, {s.get('tasks', '?')} tasks)"),
        ("mean_reward", _num(s.get("mean_reward")) + (
            f"  [{100 * s.get('ci_confidence', 0.95):.0f}% CI {ci[0]:.4f} – {ci[1]:.4f}]" if ci else "")),
        ("mean_reward_all", _num(s.get("mean_reward_all")) + "  (errors as 0; error_rate "
         + _num(s.get("error_rate")) + ")"),
        ("pass@k", "  ".join(f"@{k} {v:.4f}" for k, v in shown) + (" …" if len(pass_k) > SHOWN_K else "")
         if shown else "—"),
        ("terminated_rate", _num(s.get("terminated_rate"))),
        ("truncated_rate", _num(s.get("truncated_rate"))),
        ("end_reasons", _rates(s.get("end_reasons") or {})),
        ("truncation_reasons", str(s.get("truncation_reasons", {}))),
        ("components", _means(s.get("components") or {})),
        ("metrics", _means(s.get("metrics") or {})),
        ("verify_errors", _num(s.get("verify_errors"))),
        ("episode_errors", _num(s.get("episode_errors"))),
        ("tool_calls", _num(s.get("tool_calls"))),
        ("tool_errors", ", ".join(f"{k} {v} ({100 * (s.get('tool_error_rates') or {}).get(k, 0):.1f}%)"
                                  for k, v in (s.get("tool_errors") or {}).items()) or "—"),
        ("tokens in/out", f"{tokens['in']} / {tokens['out']}" if tokens else "— (no usage reported)"),
        ("time (summed)", " · ".join(f"{name} {time.get(key, 0):.2f} s" for name, key in (
            ("model", "policy_s"), ("tools", "env_s"), ("verify", "verify_s"), ("episodes", "total_s")))),
    ]
    if time.get("verifier_startup_s") is not None:  # once per run, not in any episode's time
        rows.append(("grader start-up", f"{time['verifier_startup_s']:.2f} s (once per run, not in verify)"))
    if time.get("sandbox_cpu_s") is not None:  # invisible to getrusage(RUSAGE_CHILDREN) here
        rows.append(("sandbox CPU", f"{time['sandbox_cpu_s']:.2f} s (grading sandboxes, summed)"))
    return rows


def summary_table(summary: dict[str, Any], *, title: str) -> Table:
    table = Table(title=title, show_header=False)
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    for label, value in summary_rows(summary):
        table.add_row(label, value)
    return table
