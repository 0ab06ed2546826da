"""Reading a run directory back: trajectories, summary and contract, as a report or export needs.

Reading is tolerant where a crash could have left a mark (a torn last line of
``trajectories.jsonl`` is ignored) and strict elsewhere (a bad line in the middle is an error).
A resumed run may hold a trajectory id twice; the last record wins.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from proofgym.core import ProofgymError
from proofgym.record import Trajectory

TRAJECTORIES = "trajectories.jsonl"
SUMMARY = "summary.json"
CONTRACT = "contract.json"

_FIELDS = {f.name for f in dataclasses.fields(Trajectory)}


class RunDirError(ProofgymError, ValueError):
    """A path that is not a readable run directory."""


@dataclass
class RunRecord:
    """A finished (or killed) run as read from disk: its directory, trajectories, and
    ``summary.json`` / ``contract.json`` when present. Read-only; works on any directory holding a
    ``trajectories.jsonl``, with or without a contract."""

    path: Path
    trajectories: list[Trajectory]
    summary: dict[str, Any] | None = None
    contract: dict[str, Any] | None = None
    skipped_lines: list[int] = field(default_factory=list)


def trajectory_from_record(record: dict[str, Any]) -> Trajectory:
    """A trajectory from its JSON record; fields this version does not know (written by a newer
    proofgym) are kept in ``extra`` instead of failing the read."""
    known = {k: v for k, v in record.items() if k in _FIELDS or k == "reward"}
    unknown = {k: v for k, v in record.items() if k not in known}
    traj = Trajectory.from_dict(known)
    for key, value in unknown.items():
        traj.extra.setdefault(key, value)
    return traj


def contract_id_of(traj: Trajectory) -> str | None:
    """The contract id a trajectory ran under (a field of newer records, else ``extra``)."""
    value = getattr(traj, "contract_id", None) or traj.extra.get("contract_id")
    return str(value) if value else None


def split_of(traj: Trajectory) -> str | None:
    """The task split a trajectory was recorded in (``train``, ``dev``, ``heldout``), if known."""
    value = getattr(traj, "split", None) or traj.extra.get("split")
    return str(value) if value else None


def read_trajectories(path: Path) -> tuple[list[Trajectory], list[int]]:
    """Every trajectory in a JSONL file, last record per id winning, and the line numbers of a
    torn final line that was skipped."""
    lines = path.read_bytes().split(b"\n")
    by_id: dict[str, Trajectory] = {}
    skipped: list[int] = []
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            if i == last:  # a crash mid-write leaves a torn last line; that episode simply reruns
                skipped.append(i + 1)
                continue
            raise RunDirError(f"{path}:{i + 1}: not a JSON record ({exc}); the file is corrupt "
                              "before its last line") from None
        traj = trajectory_from_record(record)
        by_id.pop(traj.trajectory_id, None)
        by_id[traj.trajectory_id] = traj
    return list(by_id.values()), skipped


def load_run(path: str | Path) -> RunRecord:
    """Read a run directory (or a ``trajectories.jsonl`` file directly)."""
    path = Path(path)
    if path.is_file():
        root, jsonl = path.parent, path
    else:
        root, jsonl = path, path / TRAJECTORIES
    if not jsonl.is_file():
        raise RunDirError(f"{path} is not a run: no {TRAJECTORIES} in it (write one with "
                          "`proofgym eval ENV --out DIR`)")
    trajectories, skipped = read_trajectories(jsonl)
    return RunRecord(root, trajectories, _read_json(root / SUMMARY), _read_json(root / CONTRACT), skipped)


def _read_json(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        data = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise RunDirError(f"{path}: not valid JSON ({exc})") from None
    return data if isinstance(data, dict) else {"value": data}
