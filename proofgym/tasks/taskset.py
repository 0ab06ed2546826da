"""A task set: the distribution an env samples from, with lookup by stable id."""

from __future__ import annotations

import difflib
import hashlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from proofgym.core import Task, TaskNotFoundError
from proofgym.core.errors import ConfigError
from proofgym.tasks.splits import GroupBy, HeldOutError, SplitManifest

#: Most tasks :meth:`TaskSet.from_generator` builds (1e6 Arith tasks: about 40 s and 0.6 GB).
MAX_GENERATED = 1_000_000


class TaskSet:
    """An ordered, immutable collection of tasks with unique ids.

    Invariants: iteration order is the construction order; ``get(id)`` always returns the same
    task; ``sample(rng)`` depends only on the generator's state (so a seeded env samples the same
    task every time); ``content_hash`` changes when any task's content changes.

    Splits: :attr:`manifest` is the frozen train/dev/heldout assignment, the one every consumer
    reads (``eval --split``, records, ``show``, ``export``, ``serve``, the TRL guard). By default it
    is frozen from the task ids with :data:`DEFAULT_RATIOS`, except that a task which carries its
    own split (:attr:`Task.split`: RepoRepair's recipe rule) keeps it; attach another with
    :meth:`with_splits` (checked against both). A task set made
    by :meth:`for_training` holds only training tasks and refuses any other id with
    :class:`HeldOutError`, so an env built on it cannot be reset on a held-out task.
    """

    def __init__(self, tasks: Iterable[Task], *, name: str = "tasks",
                 manifest: SplitManifest | None = None, training: bool = False) -> None:
        self.name = name
        self.training = training
        self._manifest = manifest
        self._tasks: tuple[Task, ...] = tuple(tasks)
        self._by_id: dict[str, Task] = {}
        for task in self._tasks:
            if not isinstance(task, Task):
                raise TypeError(f"TaskSet {name!r} got {type(task).__name__}; expected a Task")
            if task.id in self._by_id:
                raise ConfigError(f"TaskSet {name!r}: duplicate task id {task.id!r}; ids must be unique")
            self._by_id[task.id] = task
        if not self._tasks:
            raise ConfigError(f"TaskSet {name!r} is empty")

    @classmethod
    def from_iterable(cls, items: Iterable[Any], *, name: str = "tasks",
                      task_factory: Callable[[Mapping[str, Any]], Task] | None = None) -> TaskSet:
        """Tasks from an iterable of :class:`Task` objects, or of records (mappings) turned into
        tasks by ``task_factory`` (for example ``QATask.from_record``)."""
        from proofgym.tasks.loaders import tasks_from_records

        return cls(tasks_from_records(items, task_factory, source=name), name=name)

    @classmethod
    def from_jsonl(cls, path: str | Path, task_factory: Callable[[Mapping[str, Any]], Task], *,
                   name: str | None = None) -> TaskSet:
        """One task per line of a JSONL file (``.jsonl``, or gzipped ``.jsonl.gz``), built by
        ``task_factory`` from the line's JSON object; a bad line is an error naming the file and
        line. The task set's name defaults to the file name without its suffixes."""
        from proofgym.tasks.loaders import read_jsonl_records, tasks_from_records

        path = Path(path)
        default = path.name.removesuffix(".gz").removesuffix(".jsonl").removesuffix(".json")
        return cls(tasks_from_records(read_jsonl_records(path), task_factory, source=str(path)),
                   name=name or default)

    @classmethod
    def from_hf(cls, dataset: Any, task_factory: Callable[[Mapping[str, Any]], Task], *,
                name: str | None = None, fields: Mapping[str, str] | None = None) -> TaskSet:
        """Tasks from a Hugging Face ``datasets.Dataset`` (the ``datasets`` extra), or the
        directory one was saved to (``Dataset.save_to_disk``), one task per row; ``fields``
        renames columns to the record keys ``task_factory`` expects."""
        from proofgym.tasks.loaders import dataset_records, load_dataset_dir, tasks_from_records

        if isinstance(dataset, (str, Path)):
            name = name or Path(dataset).name
            dataset = load_dataset_dir(dataset)

        label = name or getattr(getattr(dataset, "info", None), "dataset_name", None) or "hf-dataset"
        return cls(tasks_from_records(dataset_records(dataset, fields), task_factory, source=label),
                   name=label)

    @classmethod
    def from_generator(cls, factory: Callable[[int], Task], n: int, *, name: str = "tasks") -> TaskSet:
        """Tasks ``factory(0) ... factory(n - 1)``: procedurally generated, seeded by index.
        ``n`` is at most :data:`MAX_GENERATED` (a task set is built eagerly, in memory)."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ConfigError(f"TaskSet {name!r}: the number of tasks must be a whole number >= 1, got {n!r}")
        if n > MAX_GENERATED:
            raise ConfigError(f"TaskSet {name!r}: {n} tasks is more than the {MAX_GENERATED} a generated "
                              "task set may hold (it is built in memory before the first episode); "
                              "ask for fewer")
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
            if self._manifest is not None and task_id in self._manifest.tasks:
                if self.training:
                    self._manifest.check_training([task_id])  # raises HeldOutError
                raise TaskNotFoundError(
                    f"task {task_id!r} is in split {self._manifest.split_of(task_id)!r}, "
                    f"not in {self.name!r}") from None
            close = difflib.get_close_matches(str(task_id), self._by_id, n=3)
            hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
            raise TaskNotFoundError(
                f"no task {task_id!r} in task set {self.name!r} ({len(self)} tasks){hint}"
            ) from None

    def sample(self, rng: np.random.Generator) -> Task:
        return self._tasks[int(rng.integers(len(self._tasks)))]

    # ----------------------------------------------------------------- splits
    @property
    def manifest(self) -> SplitManifest:
        """The split manifest (frozen from the tasks' own splits and the ids' hashes with the
        default ratios, unless one was set)."""
        if self._manifest is None:
            self._manifest = SplitManifest.freeze(self._tasks, name=self.name,
                                                  taskset_hash=self.content_hash)
        return self._manifest

    def with_splits(self, manifest: SplitManifest | None = None, *,
                    ratios: Mapping[str, float] | None = None, salt: str = "",
                    group_by: GroupBy | None = None) -> TaskSet:
        """This task set with a given manifest (checked against the tasks' content hashes), or
        with a manifest frozen now from ``ratios``/``salt``; ``group_by`` (a task metadata key,
        or a function of the task) keeps each group's tasks in one split."""
        if manifest is None:
            manifest = SplitManifest.freeze(self._tasks, name=self.name, taskset_hash=self.content_hash,
                                            ratios=ratios, salt=salt, group_by=group_by)
        else:
            manifest.verify_tasks(self._tasks)
        return TaskSet(self._tasks, name=self.name, manifest=manifest, training=self.training)

    def split_of(self, task_id: str) -> str:
        return self.manifest.split_of(task_id)

    def split(self, name: str) -> TaskSet:
        """The tasks of one split (``train``, ``dev``, ``heldout``; burned tasks leave ``heldout``).
        ``split("train")`` is guarded like :meth:`for_training`."""
        pool = set(self.manifest.pool(name))
        subset = [t for t in self._tasks if t.id in pool]
        if not subset:
            raise ConfigError(f"split {name!r} of task set {self.name!r} is empty "
                              f"(split sizes: {self.manifest.counts()})")
        return TaskSet(subset, name=f"{self.name}[{name}]", manifest=self.manifest,
                       training=name == "train")

    def for_training(self) -> TaskSet:
        """The training tasks only; asking it for any other task raises :class:`HeldOutError`."""
        return self.split("train")

    @property
    def content_hash(self) -> str:
        digest = hashlib.sha256()
        for task in self._tasks:
            digest.update(f"{task.id}\0{task.content_hash}\n".encode())
        return digest.hexdigest()[:16]

    def __repr__(self) -> str:
        return f"TaskSet({self.name!r}, {len(self)} tasks)"


__all__ = ["HeldOutError", "TaskSet"]
