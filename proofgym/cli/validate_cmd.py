"""``proofgym validate``: prove an environment's grader before training on it."""

from __future__ import annotations

import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Annotated, Optional

import orjson
import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from proofgym.cli.console import console
from proofgym.core.defaults import DEFAULTS

#: Failing task ids shown in a row of the table (all of them are in the details and --json).
SHOWN_IDS = 5
#: Up to this many failures are printed one per line; more go to a file the message names.
MAX_PRINTED_FAILURES = 20
#: Without a terminal, a plain progress line at least this often (seconds) and at every 10%.
PLAIN_PROGRESS_EVERY_S = 10.0


def validate_command(
    env_id: Annotated[str, typer.Argument(metavar="ENV", help="e.g. proofgym/Arith-v0")],
    n: Annotated[Optional[int], typer.Option("-n", "--tasks", min=1,  # noqa: UP045 - typer
                                             help="Validate only the first N tasks.")] = None,
    task: Annotated[Optional[list[str]], typer.Option(  # noqa: UP045 - typer
        "--task", help="Validate this task id (repeatable).")] = None,
    control: Annotated[Optional[list[str]], typer.Option(  # noqa: UP045 - typer
        "--control", help="Play only this control of each task (repeatable; default: all of them).")] = None,
    json_out: Annotated[Optional[Path], typer.Option(  # noqa: UP045 - typer
        "--json", help="Also write the full result as JSON to this file.")] = None,
    concurrency: Annotated[Optional[int], typer.Option(  # noqa: UP045 - typer
        "-c", "--concurrency", min=1,
        help="Tasks validated at once, each in its own env (default: the CPU count).")] = None,
    env_arg: Annotated[Optional[list[str]], typer.Option(  # noqa: UP045 - typer
        "--env-arg", metavar="KEY=VALUE",
        help="A keyword argument for the env's factory, typed by its signature (repeatable).")] = None,
    failures_out: Annotated[Optional[Path], typer.Option(  # noqa: UP045 - typer
        "--failures", help=f"Write every failure to this file (done anyway, to a temporary file, "
                           f"when there are more than {MAX_PRINTED_FAILURES}).")] = None,
    grader_timeout: Annotated[float, typer.Option(
        metavar="SECONDS", help="Seconds one grading may take; a grader past it fails its check "
                                "(a task's longer grading_timeout_s gets that plus 30 s)."),
    ] = DEFAULTS.grader_timeout_s,
    verifier: Annotated[str, typer.Option(
        help="process (crash-isolated worker processes: a grader that hangs, segfaults or exits "
             "fails its check) | inline (threads here; tasks need not pickle)."),
    ] = DEFAULTS.verifier_backend(),
) -> None:
    """Check the grader: reference solutions score 1, doing nothing and every control score 0,
    and grading twice gives the same verdict. Exits 1 on any failure."""
    from proofgym.cli.env_args import parse_env_args
    from proofgym.core import ConfigError
    from proofgym.eval.validate import validate

    if not grader_timeout > 0:
        raise ConfigError(f"--grader-timeout must be a number of seconds > 0 (got {grader_timeout:g})")
    if verifier not in ("process", "inline"):
        raise typer.BadParameter(f"{verifier!r}; use 'process' or 'inline'", param_hint="--verifier")
    env_kwargs = parse_env_args(env_id, env_arg)
    workers = DEFAULTS.validate_workers(concurrency)
    progress = _progress(env_id)
    with progress:
        try:
            report = validate(env_id, limit=n, task_ids=task, env_kwargs=env_kwargs, concurrency=workers,
                              on_start=progress.start, on_task=lambda _t: progress.advance(),
                              verifier=verifier, grader_timeout_s=grader_timeout, controls=control)
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
    failures = report.failures()
    lines = [f"FAIL {name} · {task_id}: {problem}" for name, task_id, problem in failures]
    if failures_out is None and len(failures) > MAX_PRINTED_FAILURES:
        fd, name = tempfile.mkstemp(prefix="proofgym-validate-failures-", suffix=".txt")
        os.close(fd)
        failures_out = Path(name)
    if failures_out is not None:
        failures_out.write_text("".join(line + "\n" for line in lines))
    if len(failures) <= MAX_PRINTED_FAILURES:
        for line in lines:
            console.print(f"[red]FAIL[/]{line[4:]}", markup=True, highlight=False, soft_wrap=True)
    else:
        console.print(f"[red]{len(failures)} failures[/]: every one is listed in {failures_out}",
                      highlight=False, soft_wrap=True)
    if json_out is not None:
        json_out.write_bytes(orjson.dumps(report.to_dict(), option=orjson.OPT_INDENT_2))
    timing = f"in {report.wall_time_s or 0.0:.1f} s wall time at concurrency {report.concurrency}"
    if not report.ok:
        failed = [c.name for c in report.checks if not c.ok]
        console.print(f"[bold red]grader validation FAILED[/]: {', '.join(failed)} ({timing})",
                      highlight=False)
        raise typer.Exit(1)
    console.print(f"[green]grader validation passed[/]: {report.tasks} tasks, {len(report.checks)} "
                  f"checks, {timing}", highlight=False)


class _ProgressLines:
    """Progress without a terminal: a plain line at every 10% of the tasks and at least every
    :data:`PLAIN_PROGRESS_EVERY_S` seconds (a log file or CI shows that the run is alive)."""

    def __init__(self, env_id: str) -> None:
        self.env_id, self.total, self.done = env_id, 0, 0
        self.started = self.last = time.monotonic()
        self._lock = threading.Lock()

    def __enter__(self) -> _ProgressLines:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def start(self, total: int) -> None:
        self.total, self.started, self.last = total, time.monotonic(), time.monotonic()
        console.print(f"validating {self.env_id}: {total} tasks", highlight=False)

    def advance(self) -> None:
        with self._lock:
            self.done += 1
            now = time.monotonic()
            step = max(1, self.total // 10)
            if self.done == self.total or self.done % step == 0 or now - self.last >= PLAIN_PROGRESS_EVERY_S:
                self.last = now
                console.print(f"validated {self.done}/{self.total} tasks ({now - self.started:.0f} s)",
                              highlight=False)


class _ProgressBar:
    """A rich progress bar on a terminal."""

    def __init__(self, env_id: str) -> None:
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=console, transient=True)
        self.bar = self.progress.add_task(f"validating {env_id}", total=None)

    def __enter__(self) -> _ProgressBar:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(None, None, None)

    def start(self, total: int) -> None:
        self.progress.update(self.bar, total=total)

    def advance(self) -> None:
        self.progress.advance(self.bar)


def _progress(env_id: str) -> _ProgressBar | _ProgressLines:
    return _ProgressBar(env_id) if console.is_terminal else _ProgressLines(env_id)
