"""A crash-safe run directory.

Layout of ``DIR``::

    contract.json        the RolloutContract (written atomically before any episode)
    splits.json          the task set's split manifest, frozen for this run
    trajectories.jsonl   one trajectory per line, append-only
    verdicts.jsonl       re-grades (``proofgym verify``), beside the original verdicts
    summary.json         headline numbers, rewritten atomically at the end of a run

Durability: a trajectory counts as done only after its line was written, flushed and fsynced, so
a SIGKILL or power cut loses at most the episodes in flight. Writers that call ``write`` from
several threads share fsyncs (group commit: one fsync makes every line written before it durable),
so concurrent loops are not held to one fsync per record. Such a crash can leave a torn last line;
opening the store for writing detects it, keeps its bytes in ``trajectories.jsonl.torn`` and cuts
the file back to the last complete record (that episode simply runs again). A bad line *before*
the last is not a crash artefact and is reported, never dropped.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson

from proofgym.core import ProofgymError
from proofgym.record.contract import (
    CONTRACT_FILE,
    ContractError,
    RolloutContract,
    describe_differences,
    diff_contracts,
)
from proofgym.record.trajectory import Trajectory
from proofgym.tasks import SplitManifest

log = logging.getLogger(__name__)

TRAJECTORIES = "trajectories.jsonl"
VERDICTS = "verdicts.jsonl"
SUMMARY = "summary.json"
SPLITS = "splits.json"


class RunStoreError(ProofgymError, RuntimeError):
    """A run directory that cannot be used as asked (exists already, corrupt, wrong contract)."""


def trajectory_id_for(contract_id: str, task_id: str, attempt: int) -> str:
    """The id of attempt ``attempt`` at ``task_id`` under a contract: derived, never random, so
    a resumed run recognises the episodes it already has."""
    return f"{contract_id}/{task_id}#{attempt}"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that a crash leaves the old file or the new one."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _scan_jsonl(path: Path) -> tuple[list[dict[str, Any]], int, bytes]:
    """The complete records of a JSONL file, the byte offset where they end, and any torn tail.

    Raises :class:`RunStoreError` for a bad line that is followed by good ones (corruption, not a
    crash: a crash only tears the end).
    """
    if not path.exists():
        return [], 0, b""
    data = path.read_bytes()
    records: list[dict[str, Any]] = []
    offset = 0
    lineno = 0
    while offset < len(data):
        end = data.find(b"\n", offset)
        line = data[offset:] if end == -1 else data[offset:end]
        lineno += 1
        try:
            if end == -1:  # no newline: the write did not finish
                raise ValueError("no newline")
            records.append(orjson.loads(line))
        except (ValueError, orjson.JSONDecodeError):
            rest = b"" if end == -1 else data[end + 1:]
            if rest.strip():
                raise RunStoreError(
                    f"{path}: line {lineno} is not a complete JSON record but later lines are; this "
                    "is corruption, not an interrupted write. Inspect the file (records after the "
                    "bad line are intact) and remove or repair that line by hand") from None
            return records, offset, data[offset:]
        offset = end + 1
    return records, offset, b""


class RunStore:
    """The run directory of one contract; a :class:`~proofgym.eval.runner.TrajectorySink`.

    Invariants:
        * every line of ``trajectories.jsonl`` is one complete trajectory of this store's contract,
          with ``contract_id``, ``task_hash`` and ``split`` set;
        * a trajectory id appears at most once (a second write of a finished episode is ignored);
        * :attr:`completed` is exactly the set of ids on disk.

    ``write`` is thread-safe, so a concurrent orchestrator may share one store.
    """

    def __init__(self, root: Path, contract: RolloutContract, *,
                 manifest: SplitManifest | None = None, _records: list[dict[str, Any]] | None = None,
                 _writable: bool = True) -> None:
        self.root = Path(root)
        self.contract = contract
        self.manifest = manifest
        self.completed: set[str] = {r["trajectory_id"] for r in (_records or [])}
        self.repaired: bytes = b""
        self._lock = threading.Lock()  # guards the file buffer and the bookkeeping below
        self._sync_lock = threading.Lock()  # one fsync at a time; later writers ride on it
        self._unsynced: list[str] = []  # written and flushed, not yet fsynced (not done yet)
        self._written = self._synced = 0  # line counters for group commit
        self._file = (self.root / TRAJECTORIES).open("ab") if _writable else None

    # ------------------------------------------------------------ opening
    @classmethod
    def create(cls, root: str | Path, contract: RolloutContract, *,
               manifest: SplitManifest | None = None) -> RunStore:
        """A new run in ``root`` (created if needed). Refuses a directory that already holds a
        run, so nothing is overwritten: resume it or choose another directory."""
        root = Path(root)
        if (root / CONTRACT_FILE).exists() or (root / TRAJECTORIES).exists():
            raise RunStoreError(
                f"{root} already holds a run; continue it with `--resume {root}` (or "
                "RunStore.resume), or write to a new directory")
        root.mkdir(parents=True, exist_ok=True)
        if manifest is not None:
            write_atomic(root / SPLITS, manifest.to_json())
        write_atomic(root / CONTRACT_FILE, contract.to_json())
        store = cls(root, contract, manifest=manifest, _records=[])
        _fsync_dir(root)
        return store

    @classmethod
    def resume(cls, root: str | Path, contract: RolloutContract, *,
               manifest: SplitManifest | None = None) -> RunStore:
        """Continue the run in ``root`` under ``contract``: its finished episodes are kept (see
        :attr:`completed`), a torn last line is repaired, and a different contract is refused
        with the settings that changed. A directory without a run yet starts one."""
        root = Path(root)
        if not (root / CONTRACT_FILE).exists():
            if (root / TRAJECTORIES).exists() and (root / TRAJECTORIES).stat().st_size:
                raise RunStoreError(f"{root} has trajectories but no {CONTRACT_FILE}; it was not "
                                    "written by proofgym, refusing to resume it")
            return cls.create(root, contract, manifest=manifest)
        stored = RolloutContract.load(root)
        if stored.id != contract.id:
            raise ContractError(
                f"refusing to resume {root}: it ran under contract {stored.id}, this run's contract "
                f"is {contract.id}. Changed: {describe_differences(diff_contracts(stored, contract))}. "
                "Resume with the original settings, or start a new run directory")
        records, good_end, torn = _scan_jsonl(root / TRAJECTORIES)
        if torn:
            cls._repair(root / TRAJECTORIES, good_end, torn)
        records = cls._check_records(root, records, contract)
        store = cls(root, contract, manifest=manifest, _records=records)
        store.repaired = torn
        return store

    @classmethod
    def open(cls, root: str | Path) -> RunStore:
        """A finished (or killed) run, for reading and re-grading; it accepts no new episodes.
        A torn last line is skipped here, and repaired by :meth:`resume`."""
        root = Path(root)
        contract = RolloutContract.load(root)
        manifest = SplitManifest.load(root / SPLITS) if (root / SPLITS).exists() else None
        records, _, torn = _scan_jsonl(root / TRAJECTORIES)
        if torn:
            log.warning("%s: ignoring a torn last line (%d bytes); `--resume` repairs it",
                        root / TRAJECTORIES, len(torn))
        records = cls._check_records(root, records, contract)
        return cls(root, contract, manifest=manifest, _records=records, _writable=False)

    @staticmethod
    def _repair(path: Path, good_end: int, torn: bytes) -> None:
        torn_path = path.with_name(path.name + ".torn")
        with torn_path.open("ab") as f:  # kept for forensics; it never counted as done
            f.write(torn + b"\n")
            f.flush()
            os.fsync(f.fileno())
        with path.open("r+b") as f:
            f.truncate(good_end)
            f.flush()
            os.fsync(f.fileno())
        log.warning("%s: repaired a torn last line (%d bytes, kept in %s); that episode runs again",
                    path, len(torn), torn_path.name)

    @staticmethod
    def _check_records(root: Path, records: list[dict[str, Any]],
                       contract: RolloutContract) -> list[dict[str, Any]]:
        seen: set[str] = set()
        for i, record in enumerate(records, 1):
            if record.get("contract_id") != contract.id:
                raise RunStoreError(f"{root / TRAJECTORIES}: line {i} belongs to contract "
                                    f"{record.get('contract_id')}, not {contract.id}")
            if record["trajectory_id"] in seen:
                raise RunStoreError(f"{root / TRAJECTORIES}: line {i} repeats trajectory "
                                    f"{record['trajectory_id']!r}")
            seen.add(record["trajectory_id"])
        return records

    # ------------------------------------------------------------ writing
    def write(self, trajectory: Trajectory) -> None:
        """Record a finished episode durably (written, flushed, fsynced before returning).

        Stamps the contract id and the task's split, and derives the trajectory id from
        (contract id, task id, ``extra["attempt"]``). A repeat of a recorded episode is ignored.
        """
        if self._file is None:
            raise RunStoreError(f"{self.root} was opened read-only; use RunStore.resume to add episodes")
        trajectory.contract_id = self.contract.id
        if "attempt" in trajectory.extra:
            trajectory.trajectory_id = trajectory_id_for(self.contract.id, trajectory.task_id,
                                                         int(trajectory.extra["attempt"]))
        if self.manifest is not None and trajectory.task_id in self.manifest.tasks:
            trajectory.split = self.manifest.split_of(trajectory.task_id)
        line = trajectory.to_json() + b"\n"
        with self._lock:
            duplicate = (trajectory.trajectory_id in self.completed
                         or trajectory.trajectory_id in self._unsynced)
            if duplicate:
                # the first write may still be waiting for its fsync: return only once it is done
                ticket = self._written if trajectory.trajectory_id in self._unsynced else 0
            else:
                self._file.write(line)
                self._file.flush()
                self._unsynced.append(trajectory.trajectory_id)
                self._written += 1
                ticket = self._written
        if duplicate:
            log.warning("%s: trajectory %s is already recorded; not writing it twice",
                        self.root, trajectory.trajectory_id)
        self._sync(ticket)

    def _sync(self, ticket: int) -> None:
        """Return once line ``ticket`` is fsynced; one fsync covers every line written before it."""
        with self._sync_lock:
            if self._synced >= ticket:
                return  # another writer's fsync already made this line durable
            with self._lock:
                assert self._file is not None
                target, ids = self._written, list(self._unsynced)
                fd = self._file.fileno()
            os.fsync(fd)
            with self._lock:
                self._synced = target
                self.completed.update(ids)
                del self._unsynced[: len(ids)]

    def write_summary(self, summary: Mapping[str, Any]) -> None:
        write_atomic(self.root / SUMMARY, orjson.dumps(dict(summary), option=orjson.OPT_INDENT_2))

    def append_verdicts(self, records: list[dict[str, Any]]) -> None:
        """Append re-grade records to ``verdicts.jsonl`` (durably, like trajectories; a torn last
        line left by a killed re-grade is repaired first)."""
        path = self.root / VERDICTS
        _, good_end, torn = _scan_jsonl(path)
        if torn:
            self._repair(path, good_end, torn)
        with self._lock, path.open("ab") as f:
            for record in records:
                f.write(orjson.dumps(record, default=repr) + b"\n")
            f.flush()
            os.fsync(f.fileno())

    def close(self) -> None:
        with self._sync_lock, self._lock:  # never close under a running fsync
            if self._file is not None:
                self._file.close()
                self._file = None

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ reading
    def records(self) -> Iterator[dict[str, Any]]:
        """The complete trajectory records on disk, in write order (a torn tail is skipped)."""
        records, _, _ = _scan_jsonl(self.root / TRAJECTORIES)
        return iter(records)

    def trajectories(self) -> list[Trajectory]:
        return [Trajectory.from_dict(r) for r in self.records()]

    def verdict_records(self) -> list[dict[str, Any]]:
        records, _, _ = _scan_jsonl(self.root / VERDICTS)
        return records

    def summary(self) -> dict[str, Any] | None:
        path = self.root / SUMMARY
        return orjson.loads(path.read_bytes()) if path.exists() else None

    def __repr__(self) -> str:
        return f"RunStore({str(self.root)!r}, contract={self.contract.id}, done={len(self.completed)})"
