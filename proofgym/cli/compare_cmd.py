"""``proofgym compare RUN_A RUN_B [...]``: paired comparison of runs on the same tasks."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from proofgym.cli.console import console
from proofgym.cli.numbers import number


def compare_command(
    runs: Annotated[list[Path], typer.Argument(
        metavar="RUN_A RUN_B [RUN ...]", help="Run directories; each later run is B to each earlier A.")],
    out: Annotated[Optional[Path], typer.Option(  # noqa: UP045 - typer
        "--out", "-o", help="Directory for compare.json and compare.html (default: here).")] = None,
    by: Annotated[Optional[list[str]], typer.Option(  # noqa: UP045 - typer
        "--by", help="Break results down by: split, end_reason, or a task metadata key (e.g. level). "
                     "Repeatable.")] = None,
    allow_differences: Annotated[bool, typer.Option(
        "--allow-differences", help="Compare even when the contracts differ in tasks, graders, limits "
                                    "or env (shown as warnings).")] = False,
    parity: Annotated[Optional[Path], typer.Option(  # noqa: UP045 - typer
        help="TOML file of allowed contract differences ([[allow]] path = '...' reason = '...').")] = None,
    threshold: Annotated[float, typer.Option(
        parser=number(), help="A reward at or above this is a pass.")] = 1.0,
    confidence: Annotated[float, typer.Option(parser=number(0.5, 0.999),
                                              help="Confidence of the paired bootstrap interval.")] = 0.95,
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap resampling.")] = 0,
) -> None:
    """Is B better than A? Paired difference in mean reward and pass@k (bootstrap CI over tasks),
    McNemar's exact test, win/tie/loss and flipped tasks, next to cost; writes compare.json and
    compare.html. Exit 2 when the runs are not comparable (different tasks, graders or limits)."""
    import orjson

    from proofgym.core import ConfigError
    from proofgym.eval.compare import COMPARE_JSON, compare
    from proofgym.eval.compare_html import COMPARE_HTML, render_compare
    from proofgym.record.rundir import write_atomic

    target = out or Path.cwd()
    if target.exists() and not target.is_dir():
        raise ConfigError(f"--out {target} is a file; give a directory for compare.json and compare.html")
    result = compare(runs, by=by or (), allow_differences=allow_differences, parity=parity,
                     threshold=threshold, confidence=confidence, seed=seed)
    target.mkdir(parents=True, exist_ok=True)
    write_atomic(target / COMPARE_JSON, orjson.dumps(result, option=orjson.OPT_INDENT_2, default=repr))
    write_atomic(target / COMPARE_HTML, render_compare(result).encode("utf-8"))
    for warning in result["warnings"]:
        console.print(f"[yellow]warning:[/] {warning}", highlight=False)
    for p in result["pairs"]:
        d, m, w = p["mean_reward"], p["mcnemar"], p["win_tie_loss"]
        ci = d["ci"]
        ci_text = f"[{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else "(one task: no interval)"
        console.print(f"[bold]{p['a']} (A) vs {p['b']} (B)[/]: {p['tasks']} paired tasks, "
                      f"{p['episode_pairs']} paired episodes", highlight=False)
        console.print(f"  mean reward  A {d['mean_a']:.3f}  B {d['mean_b']:.3f}  B-A {d['delta']:+.3f} "
                      f"{round(100 * confidence)}% CI {ci_text}", highlight=False)
        for k, v in p["pass_at_k"].items():
            ci_k = f"[{v['ci'][0]:+.3f}, {v['ci'][1]:+.3f}]" if v["ci"] else "—"
            console.print(f"  pass@{k}       A {v['mean_a']:.3f}  B {v['mean_b']:.3f}  B-A {v['delta']:+.3f} "
                          f"CI {ci_k}", highlight=False)
        console.print(f"  McNemar exact p = {m['p_value']:.4g} ({m['a_only']} pass only in A, "
                      f"{m['b_only']} only in B)", highlight=False)
        console.print(f"  tasks: {w['win']} win / {w['tie']} tie / {w['loss']} loss for B; flipped: "
                      f"{len(p['flipped']['fixed'])} fixed, {len(p['flipped']['broken'])} broken",
                      highlight=False)
    for r in result["runs"]:
        tokens = r["tokens"]
        cost = r["cost_per_solved_task"]
        console.print(f"  {r['label']}: model {r['model_s']:.2f}s, tools {r['tool_s']:.2f}s, "
                      f"tokens {tokens['in'] + tokens['out'] if tokens else '—'}, "
                      f"cost/solved task {f'{cost:.4g}' if cost is not None else '—'}", highlight=False)
    console.print(f"wrote {target / COMPARE_JSON} and {target / COMPARE_HTML}", highlight=False)
