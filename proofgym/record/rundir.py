"""The run directory on disk: its files, atomic writes, the writer's lock, and the one reader.

Layout of ``DIR``::

    contract.json        the RolloutContract (written atomically before any episode)
    splits.json          the task set's split manifest, frozen for this run
    trajectories.jsonl   one trajectory per line, append-only
    verdicts.jsonl       re-grades (``proofgym verify``): one per (trajectory, verifier version)
    summary.json         headline numbers, rewritten atomically at the end of a run
    .lock                held (``flock``) by the one process writing the run

One rule for repeated trajectory ids, used by every reader (verify, report, export, resume,
``Run.finish``): a record replaces an earlier one of the same id only when the earlier one is an
infrastructure error (``status="error"``, re-run by ``--resume``) or a finished episode whose
grading failed (a ``status="error"`` verdict, re-graded by ``--resume``); two finished, graded
records of one id are corruption and the read fails naming the line. The error records stay in
the file: each attempt is recorded.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import os
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from proofgym.core.errors import RunStoreError as RunStoreError
from proofgym.record.contract import CONTRACT_FILE
from proofgym.record.trajectory import Trajectory

TRAJECTORIES = "trajectories.jsonl"
VERDICTS = "verdicts.jsonl"
SUMMARY = "summary.json"
SPLITS = "splits.json"
LOCK = ".lock"
CONTRACT = CONTRACT_FILE

_FIELDS = {f.name for f in dataclasses.fields(Trajectory)}
_REQUIRED = {"trajectory_id": str, "task_id": str, "status": str, "steps": list}


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def disk_error(exc: OSError, path: Path) -> RunStoreError:
    """A clear error for a failed write (a full disk names itself and says what to do)."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return RunStoreError(f"the disk holding {path.parent} is full ({exc.strerror}); the run stopped "
                             f"and nothing recorded was lost. Free space, then continue with "
                             f"`proofgym eval ... --resume {path.parent}`")
    return RunStoreError(f"cannot write {path}: {exc.strerror or exc}")


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that a crash leaves the old file or the new one. The temporary
    name is unique per call, so two writers never share (and tear) one temporary file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with tmp.open("wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise disk_error(exc, path) from exc


class RunLock:
    """The exclusive writer's lock of a run directory (``flock`` on ``DIR/.lock``): released when
    the holder closes it or its process dies, so a killed run never leaves a stale lock."""

    def __init__(self, root: Path) -> None:
        self.path = root / LOCK
        self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(self._fd, 64).decode(errors="replace").strip() or "unknown"
            os.close(self._fd)
            self._fd = None
            raise RunStoreError(f"{root} is being written by another proofgym process (pid {holder}); "
                                "wait for it to finish, or write to another directory") from None
        os.ftruncate(self._fd, 0)
        os.write(self._fd, str(os.getpid()).encode())

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None


_TORN = object()  # a line that is not a complete JSON record


def scan_jsonl(path: Path) -> tuple[list[dict[str, Any]], int, bytes]:
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
        if end != -1 and not line.strip():
            offset = end + 1
            continue
        try:  # no newline: the write did not finish
            record = orjson.loads(line) if end != -1 else _TORN
        except orjson.JSONDecodeError:
            record = _TORN
        if record is _TORN:
            rest = b"" if end == -1 else data[end + 1:]
            if rest.strip():
                raise RunStoreError(
                    f"{path}: line {lineno} is not a complete JSON record but later lines are; this "
                    "is corruption, not an interrupted write. Inspect the file (records after the "
                    "bad line are intact) and remove or repair that line by hand") from None
            return records, offset, data[offset:]
        records.append(record)
        offset = end + 1
    return records, offset, b""


def check_record(record: Any, where: str) -> None:
    """Refuse a record that is valid JSON but not a trajectory, naming what is wrong."""
    if not isinstance(record, dict):
        raise RunStoreError(f"{where}: expected a trajectory record (a JSON object), got "
                            f"{type(record).__name__}; remove or repair that line")
    for name, kind in _REQUIRED.items():
        if not isinstance(record.get(name), kind):
            raise RunStoreError(f"{where}: not a trajectory record: field {name!r} is "
                                f"{'missing' if name not in record else type(record[name]).__name__}, "
                                f"expected {kind.__name__}; remove or repair that line")


def grading_failed(record: dict[str, Any]) -> bool:
    """Whether a finished episode's record carries a grader error (``--resume`` re-grades it)."""
    verdict = record.get("verdict")
    return record["status"] != "error" and isinstance(verdict, dict) and verdict.get("status") == "error"


def latest_records(records: Iterable[dict[str, Any]],
                   where: str) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Apply the one duplicate rule: the records that stand (in first-seen order) and, per id,
    how many infrastructure-error attempts were superseded or stand."""
    standing: dict[str, dict[str, Any]] = {}
    errors: dict[str, int] = {}
    for i, record in enumerate(records, 1):
        check_record(record, f"{where}: record {i}")
        tid = record["trajectory_id"]
        if record["status"] == "error":
            errors[tid] = errors.get(tid, 0) + 1
        earlier = standing.get(tid)
        if earlier is not None and not (earlier["status"] == "error" or grading_failed(earlier)):
            raise RunStoreError(f"{where}: record {i} repeats the finished trajectory {tid!r}; a run "
                                "records each episode once (only error records are retried)")
        standing[tid] = record
    return list(standing.values()), errors


def trajectory_from_record(record: dict[str, Any]) -> Trajectory:
    """A trajectory from its JSON record; fields this version does not know (written by a newer
    proofgym) are kept in ``extra`` instead of failing the read."""
    known = {k: v for k, v in record.items() if k in _FIELDS or k == "reward"}
    unknown = {k: v for k, v in record.items() if k not in known}
    try:
        traj = Trajectory.from_dict(known)
    except (TypeError, ValueError, KeyError) as exc:
        raise RunStoreError(f"record {record.get('trajectory_id')!r} is not a readable trajectory: "
                            f"{exc}") from None
    for key, value in unknown.items():
        traj.extra.setdefault(key, value)
    return traj


@dataclass
class RunRecord:
    """A finished (or killed) run as read from disk: its directory, trajectories (one per
    episode, by the duplicate rule), and ``summary.json`` / ``contract.json`` when present.

    ``missing`` is how many planned episodes have no record (``summary.json`` records the plan).
    """

    path: Path
    trajectories: list[Trajectory]
    summary: dict[str, Any] | None = None
    contract: dict[str, Any] | None = None
    skipped_lines: list[int] = field(default_factory=list)
    missing: int = 0


@dataclass(frozen=True)
class Records:
    """What a ``trajectories.jsonl`` holds, as the one reader (:func:`read_records`) sees it."""

    every: list[dict[str, Any]]  # each complete record in file order: every attempt
    standing: list[dict[str, Any]]  # one per episode, by the duplicate rule
    attempts: dict[str, int]  # per id, its infrastructure-error records
    end: int  # byte offset where the complete records end
    torn: bytes  # an incomplete last line (a crash mid-write): never counted


def read_records(path: Path) -> Records:
    """Read a trajectories file: the one reader of run records (the store, ``load_run``, resume,
    re-grading and every command go through it). Raises :class:`RunStoreError` for corruption."""
    every, end, torn = scan_jsonl(path)
    standing, attempts = latest_records(every, str(path))
    return Records(every, standing, attempts, end, torn)


def read_trajectories(path: Path) -> tuple[list[Trajectory], list[int]]:
    """The standing trajectories of a JSONL file and the line number of a torn last line that
    was skipped (a crash mid-write; that episode runs again on resume)."""
    read = read_records(path)
    skipped = [len(path.read_bytes()[: read.end].splitlines()) + 1] if read.torn else []
    return [trajectory_from_record(r) for r in read.standing], skipped


def load_run(path: str | Path) -> RunRecord:
    """Read a run directory (or a ``trajectories.jsonl`` file directly)."""
    path = Path(path)
    if path.is_file():
        root, jsonl = path.parent, path
    else:
        root, jsonl = path, path / TRAJECTORIES
    if not jsonl.is_file():
        raise RunStoreError(f"{path} is not a run: no {TRAJECTORIES} in it (write one with "
                            "`proofgym eval ENV --out DIR`)")
    trajectories, skipped = read_trajectories(jsonl)
    if not trajectories and jsonl.stat().st_size:  # a file that is not a run's JSONL
        raise RunStoreError(f"{jsonl} is not a run: it holds no trajectory record (give a run "
                            f"directory written by `proofgym eval ENV --out DIR`, or its {TRAJECTORIES})")
    summary = read_json(root / SUMMARY)
    planned = summary.get("planned") if summary else None
    missing = max(0, int(planned) - len(trajectories)) if isinstance(planned, int) else 0
    return RunRecord(root, trajectories, summary, read_json(root / CONTRACT), skipped, missing)


def read_json(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        data = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise RunStoreError(f"{path}: not valid JSON ({exc})") from None
    return data if isinstance(data, dict) else {"value": data}


def contract_id_of(traj: Trajectory) -> str | None:
    """The contract id a trajectory ran under (a field of newer records, else ``extra``)."""
    value = getattr(traj, "contract_id", None) or traj.extra.get("contract_id")
    return str(value) if value else None


def split_of(traj: Trajectory) -> str | None:
    """The task split a trajectory was recorded in (``train``, ``dev``, ``heldout``), if known."""
    value = getattr(traj, "split", None) or traj.extra.get("split")
    return str(value) if value else None
