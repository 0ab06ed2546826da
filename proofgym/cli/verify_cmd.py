"""``proofgym verify RUN``: re-grade a stored run; new verdicts go beside the original ones and
replace earlier re-grades of the same verifier version."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from proofgym.cli.console import console
from proofgym.core.defaults import DEFAULTS


def verify_command(
    run: Annotated[Path, typer.Argument(help="A run directory written by `proofgym eval`.")],
    verifier_version: Annotated[Optional[str], typer.Option(  # noqa: UP045 - typer
        help="Grade with this verifier version instead of the tasks' current one.")] = None,
    grader_timeout: Annotated[float, typer.Option(
        metavar="SECONDS", help="Seconds one grading may take; a grader past it is recorded as an "
                                "error verdict (a task's longer grading_timeout_s gets that plus "
                                "30 s).")] = DEFAULTS.grader_timeout_s,
    verifier: Annotated[str, typer.Option(
        help="process (crash-isolated worker processes: a grader that hangs, segfaults or exits "
             "is an error verdict) | inline (threads here).")] = DEFAULTS.verifier_backend(),
    grader_processes: Annotated[Optional[int], typer.Option(  # noqa: UP045 - typer
        min=1, help="Grader worker processes [default: the CPU count].")] = None,
    allow_mixed_versions: Annotated[bool, typer.Option(
        help="Re-grade even when the verdicts (new, or the run's originals) come from more than one "
             "verifier version; each version's count and mean are shown apart.")] = False,
) -> None:
    """Re-grade every finished trajectory of RUN into RUN/verdicts.jsonl (one per episode and version)."""
    from proofgym.core import ConfigError, ProofgymError
    from proofgym.verify.regrade import regrade_run

    if not grader_timeout > 0:
        raise ConfigError(f"--grader-timeout must be a number of seconds > 0 (got {grader_timeout:g})")
    if verifier not in ("process", "inline"):
        raise typer.BadParameter(f"{verifier!r}; use 'process' or 'inline'", param_hint="--verifier")
    try:
        report = regrade_run(run, verifier_version=verifier_version, verifier=verifier,
                             grader_timeout_s=grader_timeout, grader_processes=grader_processes,
                             allow_mixed_versions=allow_mixed_versions)
    except ProofgymError as exc:
        console.print(f"[bold red]error:[/] {exc}")
        raise typer.Exit(2) from None
    table = Table(title=f"re-grade of {run} · verifier {verifier_version or 'current'}",
                  show_header=False)
    for key, value in report.to_dict().items():
        if key == "verifier_version" and value is None:
            value = "current (each task's own)"
        if key == "versions":
            for version, entry in value.items():
                mean = entry["new_mean"]
                table.add_row(f"version {version}", f"{entry['regraded']} re-graded, new mean "
                              + (f"{mean:.4f}" if mean is not None else "—"))
            continue
        if key == "previous_versions":
            value = ", ".join(f"{v} ({n})" for v, n in value.items()) or "—"
        table.add_row(key, f"{value:.4f}" if isinstance(value, float) else str(value))
    console.print(table)
    failed = [r for r in report.records if r["verdict"]["status"] == "error"]
    if failed:
        console.print(f"[yellow]{len(failed)} grader errors[/] (recorded as error verdicts, never as 0), "
                      f"e.g. {failed[0]['trajectory_id']}: {failed[0]['verdict']['error']}",
                      highlight=False, soft_wrap=True)
    console.print(f"wrote {len(report.records)} verdicts to {run / 'verdicts.jsonl'}")
