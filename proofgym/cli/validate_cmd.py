"""``proofgym validate``: prove an environment's grader before training on it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import orjson
import typer
from rich.progress import Progress
from rich.table import Table

from proofgym.cli.console import console

#: Failing task ids shown in a row of the table (all of them are in the details and --json).
SHOWN_IDS = 5


def validate_command(
    env_id: Annotated[str, typer.Argument(metavar="ENV", help="e.g. proofgym/Arith-v0")],
    n: Annotated[Optional[int], typer.Option("-n", "--tasks", min=1,  # noqa: UP045 - typer
                                             help="Validate only the first N tasks.")] = None,
    task: Annotated[Optional[list[str]], typer.Option(  # noqa: UP045 - typer
        "--task", help="Validate this task id (repeatable).")] = None,
    json_out: Annotated[Optional[Path], typer.Option(  # noqa: UP045 - typer
        "--json", help="Also write the full result as JSON to this file.")] = None,
) -> None:
    """Check the grader: reference solutions score 1, doing nothing and every control score 0,
    and grading twice gives the same verdict. Exits 1 on any failure."""
    from proofgym.eval.validate import validate

    with Progress(console=console, transient=True) as progress:
        bar = progress.add_task(f"validating {env_id}", total=n)
        try:
            report = validate(env_id, limit=n, task_ids=task, on_task=lambda _t: progress.advance(bar))
        except (ValueError, KeyError) as exc:
            console.print(f"[red]error:[/] {exc}")
            raise typer.Exit(2) from None

    table = Table(title=f"{env_id} · grader validation · {report.tasks} tasks")
    for column in ("check", "expects", "tasks", "passed", "failed", "failing"):
        table.add_column(column, justify="right" if column in ("tasks", "passed", "failed") else "left",
                         no_wrap=column != "failing", overflow="fold")
    for check in report.checks:
        ids = [t for t, _ in check.failures]
        shown = ", ".join(ids[:SHOWN_IDS])
        if len(ids) > SHOWN_IDS:
            shown += f" … and {len(ids) - SHOWN_IDS} more"
        style = None if check.ok else "bold red"
        table.add_row(check.name, check.expectation, str(check.tasks), str(check.passed),
                      str(check.failed), shown, style=style)
    console.print(table)
    for check in report.checks:
        for task_id, problem in check.failures[:SHOWN_IDS]:
            console.print(f"[red]FAIL[/] {check.name} · {task_id}: {problem}", markup=True,
                          highlight=False, soft_wrap=True)
    if json_out is not None:
        json_out.write_bytes(orjson.dumps(report.to_dict(), option=orjson.OPT_INDENT_2))
    if not report.ok:
        failed = [c.name for c in report.checks if not c.ok]
        console.print(f"[bold red]grader validation FAILED[/]: {', '.join(failed)}")
        raise typer.Exit(1)
    console.print(f"[green]grader validation passed[/]: {report.tasks} tasks, {len(report.checks)} checks")
