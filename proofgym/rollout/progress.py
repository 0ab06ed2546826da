"""Live counters of a concurrent run, and a rich progress bar that shows them."""

from __future__ import annotations

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


class RunProgress:
    """A rich progress bar: episodes done of total, generating, awaiting grades, errors."""

    def __init__(self, description: str = "episodes", *, console: Console | None = None) -> None:
        self._progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("generating {task.fields[in_flight]}"),
            TextColumn("· grading {task.fields[awaiting]}"),
            TextColumn("· errors {task.fields[errors]}"),
            TimeElapsedColumn(), console=console, transient=True,
        )
        self._task = self._progress.add_task(description, total=None, in_flight=0, awaiting=0, errors=0)

    def __enter__(self) -> RunProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._progress.stop()

    def update(self, counters: RunCounters) -> None:
        self._progress.update(self._task, total=counters.total, completed=counters.done,
                              in_flight=counters.in_flight, awaiting=counters.awaiting_grades,
                              errors=counters.errors + counters.grader_errors)
