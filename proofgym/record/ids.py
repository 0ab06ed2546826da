"""Trajectory ids and provenance: the one place an id is derived and the one stamper.

An id is derived, never random, so a resumed run recognises the episodes it already has:
``CONTRACT/TASK#ATTEMPT`` under a rollout contract, ``TASK#ATTEMPT`` without one (an in-memory
run, a single episode). ``tests/test_architecture.py`` checks that no other module builds one.
"""

from __future__ import annotations

from proofgym.record.trajectory import Trajectory

__all__ = ["stamp", "trajectory_id_for"]


def trajectory_id_for(contract_id: str | None, task_id: str, attempt: int) -> str:
    """The id of attempt ``attempt`` at ``task_id`` under a contract (``None``: under none)."""
    return f"{contract_id}/{task_id}#{attempt}" if contract_id else f"{task_id}#{attempt}"


def stamp(trajectory: Trajectory, contract_id: str | None, *, attempt: int | None = None,
          split: str | None = None) -> Trajectory:
    """Stamp an episode's provenance onto its record (in place; returned for chaining).

    ``contract_id`` is recorded, ``attempt`` (when given) goes into ``extra["attempt"]``, and
    ``split`` (when given) into ``split``. Under a contract, an episode whose attempt is known gets
    the derived id, whichever loop ran it; without one the id it has is kept (a caller may have
    named a single episode).
    """
    trajectory.contract_id = contract_id
    if attempt is not None:
        trajectory.extra["attempt"] = attempt
    if contract_id and "attempt" in trajectory.extra:
        trajectory.trajectory_id = trajectory_id_for(contract_id, trajectory.task_id,
                                                     int(trajectory.extra["attempt"]))
    if split is not None:
        trajectory.split = split
    return trajectory
