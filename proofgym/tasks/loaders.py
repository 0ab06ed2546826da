"""Where task records come from: Python iterables, JSONL files, Hugging Face ``datasets``.

A loader yields plain records (mappings); a *task factory* (for example
``proofgym.verify.graders.qa.QATask.from_record``) turns each record into a :class:`Task`. The split keeps
this layer free of graders: the task types that grade live above it.
"""

from __future__ import annotations

import gzip
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson

from proofgym.core import Task
from proofgym.core.errors import MissingExtraError as MissingExtraError
from proofgym.core.errors import TaskFileNotFoundError
from proofgym.core.errors import TaskRecordError as TaskRecordError

TaskFactory = Callable[[Mapping[str, Any]], Task]


def read_jsonl_records(path: Path) -> Iterator[dict[str, Any]]:
    """The JSON objects of a JSONL file, one per non-blank line; a name ending in ``.gz`` is read
    through gzip."""
    if not path.exists():
        raise TaskFileNotFoundError(f"task file {path} does not exist")
    opened = gzip.open(path, "rb") if path.name.endswith(".gz") else path.open("rb")  # noqa: SIM115
    with opened as f:
        try:
            lines = list(f)
        except (OSError, EOFError) as exc:  # gzip.BadGzipFile is an OSError
            raise TaskRecordError(f"{path}: cannot read it as gzip ({exc})") from None
        for lineno, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise TaskRecordError(f"{path}: line {lineno}: not valid JSON ({exc})") from None
            if not isinstance(record, dict):
                raise TaskRecordError(f"{path}: line {lineno}: expected a JSON object, got "
                                      f"{type(record).__name__}")
            yield {**record, "_source": f"line {lineno}"}


def load_dataset_dir(path: str | Path) -> Any:
    """A dataset saved with ``Dataset.save_to_disk`` (needs the ``datasets`` extra)."""
    try:
        import datasets
    except ImportError:
        raise MissingExtraError("loading a Hugging Face dataset needs the `datasets` package: "
                                "pip install datasets (or pip install 'proofgym[datasets]')") from None
    if not Path(path).exists():
        raise TaskFileNotFoundError(f"no dataset at {path} (expected a directory written by "
                                    "Dataset.save_to_disk)")
    return datasets.load_from_disk(str(path))


def dataset_records(dataset: Any, fields: Mapping[str, str] | None = None) -> Iterator[dict[str, Any]]:
    """Rows of a ``datasets.Dataset`` (or any iterable of dict rows), columns renamed by
    ``fields`` (``{"question": "prompt"}`` makes the ``question`` column the ``prompt`` key)."""
    if isinstance(dataset, Mapping):  # a DatasetDict: one dataset per split
        raise TaskRecordError(f"got a mapping of splits ({sorted(dataset.keys())}); pick one split "
                              "first, e.g. dataset['test']")
    rename = dict(fields or {})
    for index, row in enumerate(dataset):
        if not isinstance(row, Mapping):
            raise TaskRecordError(f"dataset row {index} is a {type(row).__name__}, not a mapping; "
                                  "pass a datasets.Dataset (not a DatasetDict: pick a split first)")
        record = {rename.get(k, k): v for k, v in row.items()}
        record.setdefault("_source", f"row {index}")
        yield record


def tasks_from_records(items: Iterable[Any], factory: TaskFactory | None, *, source: str) -> list[Task]:
    """Tasks pass through; records are built by ``factory``. Errors name the record's origin."""
    tasks: list[Task] = []
    for index, item in enumerate(items):
        if isinstance(item, Task):
            tasks.append(item)
            continue
        if not isinstance(item, Mapping):
            raise TaskRecordError(f"{source}: item {index} is a {type(item).__name__}; expected a "
                                  "Task or a mapping")
        if factory is None:
            raise TaskRecordError(f"{source}: item {index} is a record; pass task_factory= "
                                  "(e.g. QATask.from_record) to turn records into tasks")
        where = item.get("_source", f"item {index}")
        record = {k: v for k, v in item.items() if k != "_source"}
        try:
            tasks.append(factory(record))
        except (KeyError, TypeError, ValueError) as exc:
            raise TaskRecordError(f"{source}: {where}: cannot build a task: {exc}") from exc
    return tasks
