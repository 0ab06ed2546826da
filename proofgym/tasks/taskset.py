"""A task set: the distribution an env samples from, with lookup by stable id."""

from __future__ import annotations

import difflib
import hashlib
from collections.abc import Callable, Iterable, Iterator

import numpy as np

from proofgym.core import Task, TaskNotFoundError


class TaskSet:
    """An ordered, immutable collection of tasks with unique ids.

    Invariants: iteration order is the construction order; ``get(id)`` always returns the same
    task; ``sample(rng)`` depends only on the generator's state (so a seeded env samples the same
    task every time); ``content_hash`` changes when any task's content changes.
    """

    def __init__(self, tasks: Iterable[Task], *, name: str = "tasks") -> None:
        self.name = name
        self._tasks: tuple[Task, ...] = tuple(tasks)
        self._by_id: dict[str, Task] = {}
        for task in self._tasks:
            if not isinstance(task, Task):
                raise TypeError(f"TaskSet {name!r} got {type(task).__name__}; expected a Task")
            if task.id in self._by_id:
                raise ValueError(f"TaskSet {name!r}: duplicate task id {task.id!r}; ids must be unique")
            self._by_id[task.id] = task
        if not self._tasks:
            raise ValueError(f"TaskSet {name!r} is empty")

    @classmethod
    def from_generator(cls, factory: Callable[[int], Task], n: int, *, name: str = "tasks") -> TaskSet:
        """Tasks ``factory(0) ... factory(n - 1)``: procedurally generated, seeded by index."""
        return cls((factory(i) for i in range(n)), name=name)

    def __len__(self) -> int:
        return len(self._tasks)

    def __iter__(self) -> Iterator[Task]:
        return iter(self._tasks)

    def __getitem__(self, index: int) -> Task:
        return self._tasks[index]

    def __contains__(self, task_id: object) -> bool:
        return task_id in self._by_id

    @property
    def ids(self) -> list[str]:
        return [t.id for t in self._tasks]

    def get(self, task_id: str) -> Task:
        try:
            return self._by_id[task_id]
        except KeyError:
            close = difflib.get_close_matches(str(task_id), self._by_id, n=3)
            hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
            raise TaskNotFoundError(
                f"no task {task_id!r} in task set {self.name!r} ({len(self)} tasks){hint}"
            ) from None

    def sample(self, rng: np.random.Generator) -> Task:
        return self._tasks[int(rng.integers(len(self._tasks)))]

    @property
    def content_hash(self) -> str:
        digest = hashlib.sha256()
        for task in self._tasks:
            digest.update(f"{task.id}\0{task.content_hash}\n".encode())
        return digest.hexdigest()[:16]

    def __repr__(self) -> str:
        return f"TaskSet({self.name!r}, {len(self)} tasks)"
