"""``proofgym report``: (re)write a run's ``report.html`` and print its numbers."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from proofgym.cli.console import console
from proofgym.cli.summary_table import summary_table


def report_command(
    run: Annotated[Path, typer.Argument(metavar="RUN", help="A run directory (or its trajectories.jsonl).")],
    out: Annotated[Optional[Path], typer.Option(  # noqa: UP045 - typer
        "--out", "-o", help="Where to write the page (default: RUN/report.html).")] = None,
) -> None:
    """Write a self-contained report.html for a run: numbers, plots, tasks and transcripts."""
    from proofgym.eval.metrics import summary_of
    from proofgym.eval.report import render_report
    from proofgym.record.rundir import RunStoreError, load_run, write_atomic

    try:
        loaded = load_run(run)
    except RunStoreError as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2) from None
    summary = summary_of(loaded)
    target = out or loaded.path / "report.html"
    if not target.parent.is_dir():
        from proofgym.core import ConfigError

        raise ConfigError(f"cannot write {target}: the directory {target.parent} does not exist; "
                          "create it or choose another --out")
    write_atomic(target, render_report(loaded, summary).encode("utf-8"))
    env_id = summary.get("env_id") or (loaded.trajectories[0].env_id if loaded.trajectories else "run")
    console.print(summary_table(summary, title=f"{env_id} · {len(loaded.trajectories)} episodes"))
    if loaded.missing:
        console.print(f"[yellow]{loaded.missing} planned episodes have no record[/]: the run did not "
                      f"finish; continue it with `proofgym eval ... --resume {loaded.path}`")
    if loaded.skipped_lines:
        console.print(f"[yellow]skipped a torn last line[/] ({loaded.skipped_lines}) of trajectories.jsonl")
    console.print(f"wrote {target}")
