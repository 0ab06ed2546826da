"""Live counters of a concurrent run, and a rich progress bar that shows them."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


@dataclass
class RunCounters:
    """What a run is doing right now. ``done`` counts episodes delivered (graded or failed)."""

    total: int | None = None
    done: int = 0
    in_flight: int = 0
    awaiting_grades: int = 0
    errors: int = 0
    grader_errors: int = 0


#: Without a terminal, a plain progress line at least this often (seconds) and at every 10%.
PLAIN_EVERY_S = 10.0


class RunProgress:
    """A rich progress bar: episodes done of total, generating, awaiting grades, errors. Without a
    terminal (a log file, CI, a pipe) it prints plain lines instead, at every 10% of the episodes
    and at least every :data:`PLAIN_EVERY_S` seconds while episodes finish, as ``validate`` does."""

    def __init__(self, description: str = "episodes", *, console: Console | None = None,
                 lines: bool | None = None) -> None:
        self._console = console or Console()
        self._lines = (not self._console.is_terminal) if lines is None else lines
        self._description = description
        self._started = self._last = time.monotonic()
        self._printed_done = -1
        self._announced = False
        self._progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("generating {task.fields[in_flight]}"),
            TextColumn("· grading {task.fields[awaiting]}"),
            TextColumn("· errors {task.fields[errors]}"),
            TimeElapsedColumn(), console=console, transient=True,
        )
        self._task = self._progress.add_task(description, total=None, in_flight=0, awaiting=0, errors=0)

    def __enter__(self) -> RunProgress:
        self._started = self._last = time.monotonic()
        if not self._lines:
            self._progress.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if not self._lines:
            self._progress.stop()

    def update(self, counters: RunCounters) -> None:
        if self._lines:
            self._line(counters)
            return
        self._progress.update(self._task, total=counters.total, completed=counters.done,
                              in_flight=counters.in_flight, awaiting=counters.awaiting_grades,
                              errors=counters.errors + counters.grader_errors)

    def _line(self, counters: RunCounters) -> None:
        now = time.monotonic()
        total = counters.total
        if not self._announced and total is not None:
            self._announced = True
            self._console.print(f"{self._description}: {total} episodes", highlight=False, soft_wrap=True)
        done = counters.done
        if done == self._printed_done:
            return
        step = max(1, (total or 0) // 10)
        if done == total or done % step == 0 or now - self._last >= PLAIN_EVERY_S:
            self._printed_done, self._last = done, now
            of = f"/{total}" if total is not None else ""
            self._console.print(
                f"episodes {done}{of} done · generating {counters.in_flight} · grading "
                f"{counters.awaiting_grades} · errors {counters.errors + counters.grader_errors} "
                f"({now - self._started:.0f} s)", highlight=False, soft_wrap=True)
