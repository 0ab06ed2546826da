"""Train / dev / held-out splits, assigned by a stable hash of each task id and frozen in a manifest.

Why a hash of the id: the assignment of a task must not depend on the order of the task set, the
process, the machine or the Python version (``hash()`` is salted per process), so a task never
drifts from held-out into train between two runs. Why a manifest: the assignment and the content
hash of every task are frozen in a JSON file, so a later change of a task, of the ratios or of the
hash scheme is detected instead of silently re-shuffling the splits.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from proofgym.core import Task
from proofgym.core.errors import HeldOutError as HeldOutError
from proofgym.core.errors import SplitManifestError as SplitManifestError
from proofgym.runtimes.private_dirs import write_atomic

SPLITS = ("train", "dev", "heldout")
DEFAULT_RATIOS: Mapping[str, float] = {"train": 0.8, "dev": 0.1, "heldout": 0.1}
#: The split name records carry for a held-out task that influenced training.
BURNED = "burned"
MANIFEST_VERSION = 1


def id_hash(task_id: str) -> str:
    """The sha256 of a task id (hex): what a split assignment is computed from."""
    return hashlib.sha256(task_id.encode()).hexdigest()


def assign_split(task_id: str, ratios: Mapping[str, float] = DEFAULT_RATIOS, *, salt: str = "") -> str:
    """The split of ``task_id``: a point in [0, 1) from sha256(salt, id), bucketed by ``ratios``
    in the order train, dev, heldout. Stable across processes, machines and Python versions."""
    ratios = _check_ratios(ratios)
    digest = hashlib.sha256(f"proofgym-split\0{salt}\0{task_id}".encode()).digest()
    point = int.from_bytes(digest[:8], "big") / 2**64
    edge = 0.0
    for name in SPLITS:
        edge += ratios[name]
        if point < edge:
            return name
    return SPLITS[-1]  # float rounding at the very top of the range


#: What a task set is split by: a task metadata key, or a function of the task.
GroupBy = str | Callable[[Task], Any]


def group_of(task: Task, group_by: GroupBy) -> str:
    """The group a task is split with: ``group_by(task)``, or the value of the metadata key
    ``group_by`` (a task without it is an error naming the key: a silent fallback to the task id
    would leak its group across the splits)."""
    if callable(group_by):
        value = group_by(task)
    else:
        metadata = task.get_spec().metadata or {}
        if group_by not in metadata:
            keys = ", ".join(sorted(metadata)) or "none"
            raise SplitManifestError(f"cannot split by {group_by!r}: task {task.id!r} has no metadata key "
                                     f"{group_by!r} (its keys: {keys})")
        value = metadata[group_by]
    if value is None:
        raise SplitManifestError(f"cannot split by {group_by!r}: task {task.id!r} has no value for it")
    return str(value)


def _declared_split(task: Task) -> str | None:
    """The task's own split (:attr:`Task.split`), checked to be a split name."""
    own = task.split
    if own is not None and own not in SPLITS:
        raise SplitManifestError(f"task {task.id!r} declares split {own!r}; splits are {list(SPLITS)}")
    return own


def _check_ratios(ratios: Mapping[str, float]) -> dict[str, float]:
    unknown = set(ratios) - set(SPLITS)
    if unknown:
        raise SplitManifestError(f"unknown split names {sorted(unknown)}; splits are {list(SPLITS)}")
    try:
        out = {name: float(ratios.get(name, 0.0)) for name in SPLITS}
    except (TypeError, ValueError):
        raise SplitManifestError(f"split ratios must be numbers, got {dict(ratios)}") from None
    if not all(math.isfinite(v) for v in out.values()):  # NaN passes every comparison below
        raise SplitManifestError(f"split ratios must be finite numbers, got {out}")
    if any(v < 0 for v in out.values()) or abs(sum(out.values()) - 1.0) > 1e-9:
        raise SplitManifestError(f"split ratios must be non-negative and sum to 1, got {out}")
    return out


@dataclass
class SplitManifest:
    """The frozen split of one task set.

    Invariants:
        * ``tasks`` maps every task id to its split, its id hash and its content hash at freezing
          time; assignments never change after freezing (re-freeze to change ratios).
        * A burned task stays listed under its original split but leaves the held-out pool
          (:meth:`pool`) and is reported as ``"burned"`` by :meth:`split_of`; ``burned`` records
          why, so the manifest says which held-out numbers are no longer clean.
        * A task that declares its split (:attr:`Task.split`) has that split here
          (:meth:`verify_tasks` refuses a manifest that disagrees).
        * :attr:`digest` is the sha256 of the canonical JSON: it goes into the rollout contract.
    """

    taskset: str
    taskset_hash: str
    ratios: dict[str, float]
    salt: str = ""
    tasks: dict[str, dict[str, str]] = field(default_factory=dict)
    burned: dict[str, dict[str, str]] = field(default_factory=dict)
    #: The metadata key (or function name) tasks were grouped by, ``None``: each task alone.
    group_by: str | None = None
    #: ``"task"``: every task's split is its own (:attr:`Task.split`); ``"task+hash"``: some
    #: tasks' are; ``None``: every split is the hash's.
    assigned_by: str | None = None

    @classmethod
    def freeze(cls, tasks: Iterable[Task], *, name: str, taskset_hash: str,
               ratios: Mapping[str, float] | None = None, salt: str = "",
               group_by: GroupBy | None = None) -> SplitManifest:
        """Assign every task by the hash of its id (``ratios``, default :data:`DEFAULT_RATIOS`), or
        with ``group_by`` by the hash of its group (a metadata key such as ``template``, or a
        function of the task): the tasks of one group land in one split, so a template, database
        or project is never in train and held out at once.

        A task whose source assigns its split (:attr:`Task.split`, RepoRepair's recipe) keeps it:
        the split is defined once, by the task set's source. Hash options for a task set whose
        every task declares its split would change nothing, so they are refused."""
        tasks = list(tasks)
        declared = {t.id: _declared_split(t) for t in tasks}
        if any(declared.values()) and all(declared.values()) and (
                ratios is not None or salt or group_by is not None):
            raise SplitManifestError(
                f"the tasks of {name!r} carry their split (their source assigns it, e.g. RepoRepair's "
                "recipe: held-out projects whole); ratios, salt and group_by do not apply to them. "
                "Freeze without them, or change the source's split rule")
        checked = _check_ratios(DEFAULT_RATIOS if ratios is None else ratios)
        entries = {}
        for t in tasks:
            own = declared[t.id]
            if own is not None:
                entries[t.id] = {"split": own, "id_hash": id_hash(t.id), "content_hash": t.content_hash}
            elif group_by is None:
                entries[t.id] = {"split": assign_split(t.id, checked, salt=salt), "id_hash": id_hash(t.id),
                                 "content_hash": t.content_hash}
            else:
                group = group_of(t, group_by)
                entries[t.id] = {"split": assign_split(f"group\0{group}", checked, salt=salt),
                                 "id_hash": id_hash(t.id), "content_hash": t.content_hash, "group": group}
        label = None if group_by is None else (group_by if isinstance(group_by, str)
                                                else getattr(group_by, "__qualname__", repr(group_by)))
        assigned_by = None
        if any(declared.values()):
            assigned_by = "task" if all(declared.values()) else "task+hash"
            if assigned_by == "task":  # no hash ratios apply: the shares the tasks' splits make
                checked = {n: sum(e["split"] == n for e in entries.values()) / len(entries) for n in SPLITS}
        return cls(name, taskset_hash, checked, salt, entries, group_by=label, assigned_by=assigned_by)

    # ------------------------------------------------------------- queries
    def split_of(self, task_id: str) -> str:
        """``train``, ``dev``, ``heldout``, or ``burned`` for a held-out task that was burned."""
        if task_id in self.burned:
            return BURNED
        try:
            return self.tasks[task_id]["split"]
        except KeyError:
            raise SplitManifestError(
                f"task {task_id!r} is not in the split manifest of {self.taskset!r}; the manifest "
                "was frozen for another version of the task set: freeze it again") from None

    def pool(self, split: str) -> list[str]:
        """Ids usable as ``split`` now, in manifest order (burned tasks leave every pool but
        ``burned``)."""
        if split not in (*SPLITS, BURNED):
            raise SplitManifestError(f"unknown split {split!r}; use one of {[*SPLITS, BURNED]}")
        return [tid for tid in self.tasks if self.split_of(tid) == split]

    def counts(self) -> dict[str, int]:
        return {name: len(self.pool(name)) for name in (*SPLITS, BURNED)}

    def check_training(self, task_ids: Iterable[str]) -> None:
        """The held-out guard: raise :class:`HeldOutError` if any id is not a training task."""
        bad = [(tid, self.split_of(tid)) for tid in task_ids if self.split_of(tid) != "train"]
        if bad:
            shown = ", ".join(f"{tid!r} ({split})" for tid, split in bad[:5])
            more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
            raise HeldOutError(
                f"refusing to train on non-training tasks: {shown}{more}. Only tasks of the "
                f"'train' split of {self.taskset!r} may be sampled for training; use "
                "TaskSet.split('train') or TaskSet.for_training()")

    def verify_tasks(self, tasks: Iterable[Task]) -> None:
        """Raise when a task's content changed since freezing, a task is missing from it, or a
        task's own split (:attr:`Task.split`) is not the one the manifest gives it."""
        problems = []
        for t in tasks:
            entry = self.tasks.get(t.id)
            if entry is None:
                problems.append(f"{t.id!r} is not in the manifest")
            elif entry["content_hash"] != t.content_hash:
                problems.append(f"{t.id!r} changed (content hash {entry['content_hash']} -> "
                                f"{t.content_hash})")
            elif (own := _declared_split(t)) is not None and own != entry["split"]:
                problems.append(f"{t.id!r} is {own!r} by its source's split rule, {entry['split']!r} "
                                "in the manifest")
        if problems:
            raise SplitManifestError(
                f"the task set no longer matches its split manifest ({len(problems)} problems: "
                f"{'; '.join(problems[:5])}); freeze a new manifest and record why")

    # ------------------------------------------------------------- changes
    def burn(self, task_id: str, reason: str) -> None:
        """Mark a task that influenced training (a held-out task used for tuning, a leaked
        prompt): it leaves the held-out pool, and the manifest records why."""
        if task_id not in self.tasks:
            raise SplitManifestError(f"cannot burn {task_id!r}: not in the manifest of {self.taskset!r}")
        if not reason.strip():
            raise SplitManifestError("burning a task needs a reason (what it influenced)")
        self.burned[task_id] = {"reason": reason, "was": self.tasks[task_id]["split"]}

    # ------------------------------------------------------- serialisation
    def to_dict(self) -> dict[str, Any]:
        data = {"version": MANIFEST_VERSION, "taskset": self.taskset, "taskset_hash": self.taskset_hash,
                "ratios": self.ratios, "salt": self.salt, "tasks": self.tasks, "burned": self.burned}
        if self.group_by is not None:  # absent for per-task splits: their digests stay as they were
            data["group_by"] = self.group_by
        if self.assigned_by is not None:
            data["assigned_by"] = self.assigned_by
        return data

    def to_json(self) -> bytes:
        return orjson.dumps(self.to_dict(), option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2)

    @property
    def digest(self) -> str:
        return hashlib.sha256(orjson.dumps(self.to_dict(), option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SplitManifest:
        if not isinstance(data, Mapping):
            raise SplitManifestError(f"a split manifest is a JSON object, not a {type(data).__name__}")
        if data.get("version") != MANIFEST_VERSION:
            raise SplitManifestError(f"split manifest version {data.get('version')!r} is not "
                                     f"supported (expected {MANIFEST_VERSION})")
        try:
            return cls(data["taskset"], data["taskset_hash"], _check_ratios(data["ratios"]),
                       data.get("salt", ""), dict(data["tasks"]), dict(data.get("burned", {})),
                       group_by=data.get("group_by"), assigned_by=data.get("assigned_by"))
        except KeyError as exc:
            raise SplitManifestError(f"split manifest lacks the field {exc.args[0]!r}") from None

    def save(self, path: str | Path) -> Path:
        """Write atomically (a temporary file renamed over the target), so a crash leaves the old
        manifest or the new one, never half of one."""
        path = Path(path)
        write_atomic(path, self.to_json())
        return path

    @classmethod
    def load(cls, path: str | Path) -> SplitManifest:
        try:
            data = orjson.loads(Path(path).read_bytes())
        except orjson.JSONDecodeError as exc:
            raise SplitManifestError(f"{path}: not a JSON split manifest ({exc})") from None
        return cls.from_dict(data)
