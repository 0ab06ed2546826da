"""A crash-safe run directory: the one writer (the files and the one reader are in
:mod:`proofgym.record.rundir`).

Durability: a trajectory counts as done only after its line was written, flushed and fsynced, so
a SIGKILL or power cut loses at most the episodes in flight. Writers that call ``write`` from
several threads share fsyncs (group commit: one fsync makes every line written before it durable),
so concurrent loops are not held to one fsync per record. Such a crash can leave a torn last line;
opening the store for writing detects it, keeps its bytes in ``trajectories.jsonl.torn`` and cuts
the file back to the last complete record (that episode simply runs again). A bad line *before*
the last is not a crash artefact and is reported, never dropped.

One writer at a time: a writable store holds the directory's lock (:class:`RunLock`); a second
writer is refused with a clear error. A full disk raises :class:`RunStoreError` saying so.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from proofgym.record.contract import (
    CONTRACT_FILE,
    ContractError,
    RolloutContract,
    describe_differences,
    diff_contracts,
)
from proofgym.record.ids import stamp
from proofgym.record.rundir import (
    SPLITS,
    SUMMARY,
    TRAJECTORIES,
    VERDICTS,
    Records,
    RunLock,
    RunStoreError,
    disk_error,
    fsync_dir,
    grading_failed,
    read_json,
    read_records,
    read_trajectories,
    scan_jsonl,
    write_atomic,
)
from proofgym.record.trajectory import Trajectory
from proofgym.tasks import SplitManifest

log = logging.getLogger(__name__)

__all__ = ["SPLITS", "SUMMARY", "TRAJECTORIES", "VERDICTS", "RunStore", "RunStoreError", "write_atomic"]

#: How many times ``--resume`` runs an episode that ended in an infrastructure error.
MAX_ATTEMPTS = 3


class RunStore:
    """The run directory of one contract; a :class:`~proofgym.eval.runner.TrajectorySink`.

    Invariants:
        * every line of ``trajectories.jsonl`` is one complete trajectory of this store's contract,
          with ``contract_id``, ``task_hash`` and ``split`` set;
        * a finished trajectory id appears at most once (a second write is ignored), except when
          :meth:`regrade` records it again with a new verdict; an id whose record is an
          infrastructure error may be written again (a retry), up to :data:`MAX_ATTEMPTS` error
          records;
        * :attr:`completed` is exactly the set of ids whose standing record is finished
          (``status="ok"``); :attr:`attempts` counts each id's error records;
        * :attr:`ungraded` holds the finished ids whose grading failed (a ``status="error"``
          verdict): :meth:`regrade` writes such an episode again with its new verdict.

    ``write`` is thread-safe, so a concurrent orchestrator may share one store.
    """

    def __init__(self, root: Path, contract: RolloutContract, *,
                 manifest: SplitManifest | None = None, _records: list[dict[str, Any]] | None = None,
                 _writable: bool = True, _attempts: dict[str, int] | None = None,
                 _lock: RunLock | None = None) -> None:
        self.root = Path(root)
        self.contract = contract
        self.manifest = manifest
        self.completed: set[str] = {r["trajectory_id"] for r in (_records or []) if r["status"] != "error"}
        self.ungraded: set[str] = {r["trajectory_id"] for r in (_records or []) if grading_failed(r)}
        self.attempts: dict[str, int] = dict(_attempts or {})
        self.repaired: bytes = b""
        self._run_lock = _lock
        self._lock = threading.Lock()  # guards the file buffer and the bookkeeping below
        self._sync_lock = threading.Lock()  # one fsync at a time; later writers ride on it
        self._unsynced: list[str] = []  # written and flushed, not yet fsynced (not done yet)
        self._written = self._synced = 0  # line counters for group commit
        try:
            self._file = (self.root / TRAJECTORIES).open("ab") if _writable else None
        except OSError as exc:
            if _lock is not None:
                _lock.release()
            raise disk_error(exc, self.root / TRAJECTORIES) from exc

    # ------------------------------------------------------------ opening
    @classmethod
    def create(cls, root: str | Path, contract: RolloutContract, *,
               manifest: SplitManifest | None = None) -> RunStore:
        """A new run in ``root`` (created if needed). Refuses a directory that already holds a
        run, so nothing is overwritten: resume it or choose another directory."""
        root = Path(root)
        if root.exists() and not root.is_dir():
            raise RunStoreError(f"{root} is a file, not a directory; give a directory for the run")
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RunStoreError(f"cannot create the run directory {root}: {exc.strerror or exc}") from None
        lock = RunLock(root)  # taken before the check, so two runs cannot both start here
        try:
            if (root / CONTRACT_FILE).exists() or (root / TRAJECTORIES).exists():
                raise RunStoreError(
                    f"{root} already holds a run; continue it with `--resume {root}` (or "
                    "RunStore.resume), or write to a new directory")
            if manifest is not None:
                write_atomic(root / SPLITS, manifest.to_json())
            write_atomic(root / CONTRACT_FILE, contract.to_json())
            store = cls(root, contract, manifest=manifest, _records=[], _lock=lock)
            fsync_dir(root)
        except BaseException:
            lock.release()
            raise
        return store

    @classmethod
    def resume(cls, root: str | Path, contract: RolloutContract, *,
               manifest: SplitManifest | None = None) -> RunStore:
        """Continue the run in ``root`` under ``contract``: its finished episodes are kept (see
        :attr:`completed`; episodes that ended in an infrastructure error run again), a torn last
        line is repaired, and a different contract is refused with the settings that changed.
        A directory that holds no run is refused (start one with ``create``)."""
        root = Path(root)
        if not root.is_dir():
            raise RunStoreError(f"cannot resume {root}: " + ("it is a file, not a run directory"
                                if root.exists() else "no such directory") +
                                "; start a new run with --out instead")
        if not (root / CONTRACT_FILE).exists():
            raise RunStoreError(f"cannot resume {root}: it holds no run ({CONTRACT_FILE} is missing); "
                                "start a new run with --out instead")
        lock = RunLock(root)
        try:
            stored = RolloutContract.load(root)
            if stored.id != contract.id:
                raise ContractError(
                    f"refusing to resume {root}: it ran under contract {stored.id}, this run's contract "
                    f"is {contract.id}. Changed: {describe_differences(diff_contracts(stored, contract))}. "
                    "Resume with the original settings, or start a new run directory")
            read = read_records(root / TRAJECTORIES)
            if read.torn:
                cls._repair(root / TRAJECTORIES, read.end, read.torn)
            cls._check_contract(root, read, contract)
            store = cls(root, contract, manifest=manifest, _records=read.standing, _attempts=read.attempts,
                        _lock=lock)
        except BaseException:
            lock.release()
            raise
        store.repaired = read.torn
        return store

    @classmethod
    def open(cls, root: str | Path) -> RunStore:
        """A finished (or killed) run, for reading and re-grading; it accepts no new episodes.
        A torn last line is skipped here, and repaired by :meth:`resume`."""
        root = Path(root)
        contract = RolloutContract.load(root)
        manifest = SplitManifest.load(root / SPLITS) if (root / SPLITS).exists() else None
        read = read_records(root / TRAJECTORIES)
        if read.torn:
            log.warning("%s: ignoring a torn last line (%d bytes); `--resume` repairs it",
                        root / TRAJECTORIES, len(read.torn))
        cls._check_contract(root, read, contract)
        return cls(root, contract, manifest=manifest, _records=read.standing, _writable=False,
                   _attempts=read.attempts)

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
    def _check_contract(root: Path, read: Records, contract: RolloutContract) -> None:
        for i, record in enumerate(read.every, 1):
            if record.get("contract_id") != contract.id:
                raise RunStoreError(f"{root / TRAJECTORIES}: record {i} belongs to contract "
                                    f"{record.get('contract_id')}, not {contract.id}")

    # ------------------------------------------------------------ writing
    def write(self, trajectory: Trajectory) -> None:
        """Record a finished episode durably (written, flushed, fsynced before returning).

        Stamps the contract id and the task's split, and derives the trajectory id from
        (contract id, task id, ``extra["attempt"]``). A repeat of a recorded episode is ignored.
        """
        self._sync(self._append(trajectory))

    def regrade(self, trajectory: Trajectory) -> None:
        """Record a finished episode of :attr:`ungraded` again, with its new verdict (the
        earlier record stays in the file; readers take the later one)."""
        if trajectory.trajectory_id not in self.ungraded:
            raise RunStoreError(f"{trajectory.trajectory_id!r} has no failed grading to replace")
        self._sync(self._append(trajectory, regrade=True))

    def write_many(self, trajectories: Sequence[Trajectory]) -> None:
        """:meth:`write` for several, in order, made durable by one fsync (the orchestrator
        hands over the episodes that finished while the previous write was under way)."""
        ticket = 0
        for trajectory in trajectories:
            ticket = max(ticket, self._append(trajectory))
        self._sync(ticket)

    def _append(self, trajectory: Trajectory, *, regrade: bool = False) -> int:
        """Write and flush one record; the ticket to :meth:`_sync` for it to be durable."""
        if self._file is None:
            raise RunStoreError(f"{self.root} was opened read-only; use RunStore.resume to add episodes")
        manifest = self.manifest
        stamp(trajectory, self.contract.id, split=manifest.split_of(trajectory.task_id)
              if manifest is not None and trajectory.task_id in manifest.tasks else None)
        line = trajectory.to_json() + b"\n"
        with self._lock:
            duplicate = not regrade and (trajectory.trajectory_id in self.completed
                                         or trajectory.trajectory_id in self._unsynced)
            if duplicate:
                # the first write may still be waiting for its fsync: return only once it is done
                ticket = self._written if trajectory.trajectory_id in self._unsynced else 0
            else:
                try:
                    self._file.write(line)
                    self._file.flush()
                except OSError as exc:
                    raise disk_error(exc, self.root / TRAJECTORIES) from exc
                tid = trajectory.trajectory_id
                if regrade and trajectory.verdict is not None and trajectory.verdict.status != "error":
                    self.ungraded.discard(tid)
                if trajectory.status == "error":
                    self.attempts[tid] = self.attempts.get(tid, 0) + 1
                # An error record is retried on resume, never "done": it does not join completed.
                self._unsynced.append("" if trajectory.status == "error" else tid)
                self._written += 1
                ticket = self._written
        if duplicate:
            log.warning("%s: trajectory %s is already recorded; not writing it twice",
                        self.root, trajectory.trajectory_id)
        return ticket

    def _sync(self, ticket: int) -> None:
        """Return once line ``ticket`` is fsynced; one fsync covers every line written before it."""
        with self._sync_lock:
            if self._synced >= ticket:
                return  # another writer's fsync already made this line durable
            with self._lock:
                assert self._file is not None
                target, ids = self._written, list(self._unsynced)
                fd = self._file.fileno()
            try:
                os.fsync(fd)
            except OSError as exc:
                raise disk_error(exc, self.root / TRAJECTORIES) from exc
            with self._lock:
                self._synced = target
                self.completed.update(i for i in ids if i)
                del self._unsynced[: len(ids)]

    def write_summary(self, summary: Mapping[str, Any]) -> None:
        write_atomic(self.root / SUMMARY, orjson.dumps(dict(summary), option=orjson.OPT_INDENT_2))

    def put_verdicts(self, records: list[dict[str, Any]]) -> None:
        """Record re-grades in ``verdicts.jsonl``: a new verdict *replaces* the one of the same
        (trajectory id, verifier version), so re-grading twice leaves one verdict per episode. The
        file is rewritten atomically (a killed re-grade leaves the old file or the new one)."""
        path = self.root / VERDICTS
        def key(r: dict[str, Any]) -> tuple[str, str]:
            return str(r.get("trajectory_id")), str(r.get("verifier_version"))

        new = {key(r): r for r in records}
        kept = [r for r in self.verdict_records() if key(r) not in new]
        data = b"".join(orjson.dumps(r, default=repr) + b"\n" for r in [*kept, *new.values()])
        with self._lock:
            write_atomic(path, data)

    # The old name: it appended; re-grades now replace.
    append_verdicts = put_verdicts

    def close(self) -> None:
        with self._sync_lock, self._lock:  # never close under a running fsync
            if self._file is not None:
                try:
                    self._file.close()
                except OSError as exc:  # the buffer was flushed after each write; report, not hide
                    log.warning("%s: closing failed: %s", self.root / TRAJECTORIES, exc)
                self._file = None
            if self._run_lock is not None:
                self._run_lock.release()
                self._run_lock = None

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ reading
    def records(self) -> Iterator[dict[str, Any]]:
        """The standing trajectory records on disk, one per episode by the duplicate rule of
        :mod:`proofgym.record.rundir` (a torn tail is skipped)."""
        return iter(read_records(self.root / TRAJECTORIES).standing)

    def trajectories(self) -> list[Trajectory]:
        return read_trajectories(self.root / TRAJECTORIES)[0]

    def verdict_records(self) -> list[dict[str, Any]]:
        records, _, _ = scan_jsonl(self.root / VERDICTS)
        return records

    def summary(self) -> dict[str, Any] | None:
        return read_json(self.root / SUMMARY)

    def __repr__(self) -> str:
        return f"RunStore({str(self.root)!r}, contract={self.contract.id}, done={len(self.completed)})"
