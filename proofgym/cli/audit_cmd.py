"""``proofgym audit RUN``: flag reward-hack signatures in the trajectories that paid."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from proofgym.cli.console import console
from proofgym.cli.numbers import number


def audit_command(
    run: Annotated[Path, typer.Argument(metavar="RUN", help="A run directory (or its trajectories.jsonl).")],
    min_reward: Annotated[float, typer.Option(
        parser=number(), help="Audit the trajectories with at least this reward (0 or less: every one, "
                              "scored or not).")] = 0.5,
    task_rules: Annotated[bool, typer.Option(
        help="Add the rules the run's tasks define (audit_rules()); builds the run's env.")] = True,
    strict: Annotated[bool, typer.Option(help="Exit with status 1 when a trajectory is flagged.")] = False,
) -> None:
    """Read every trajectory with reward >= --min-reward for hack signatures (test or config edits,
    runner internals, early exits, always-equal objects, swallowed assertions, forged reports,
    shadowed modules, reads outside the workspace, git-history mining, copied answers, tampering
    components); write RUN/audit.json and an Audit section into RUN/report.html."""
    import orjson

    from proofgym.core import ConfigError
    from proofgym.eval.audit import AUDIT_JSON, audit_run, task_lookup_from_contract
    from proofgym.eval.report import render_report
    from proofgym.record.rundir import RunStoreError, load_run, write_atomic

    try:
        record = load_run(run)
    except RunStoreError as exc:
        raise ConfigError(str(exc)) from None
    lookup = task_lookup_from_contract(record) if task_rules else None
    result = audit_run(record, min_reward=min_reward, task_lookup=lookup)
    write_atomic(record.path / AUDIT_JSON, orjson.dumps(result, option=orjson.OPT_INDENT_2))
    write_atomic(record.path / "report.html", render_report(record).encode("utf-8"))
    who = "every trajectory" if min_reward <= 0 else f"reward >= {min_reward:g}"
    console.print(f"audited {result['audited']} of {result['trajectories']} trajectories ({who}) with "
                  f"{len(result['rules'])} rules: {result['flagged']} flagged", highlight=False)
    for entry in result["trajectories_flagged"]:
        first = entry["findings"][0]
        reward = "—" if entry["reward"] is None else f"{entry['reward']:.3f}"
        console.print(f"  [yellow]FLAG[/] {entry['trajectory_id']} (reward {reward}): "
                      f"{', '.join(entry['families'])}; {first['where']}: {first['evidence']}",
                      highlight=False, soft_wrap=True)
    if result["flagged"]:
        console.print(f"read them with `proofgym show {run} TRAJECTORY`, or in {record.path / 'report.html'}"
                      "#audit", highlight=False)
    console.print(f"wrote {record.path / AUDIT_JSON} and {record.path / 'report.html'}", highlight=False)
    if strict and result["flagged"]:
        raise typer.Exit(1)
