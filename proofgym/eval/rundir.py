"""Reading a run directory back: a thin re-export of the one reader in
:mod:`proofgym.record.rundir` (one duplicate rule, record shapes checked, count vs plan)."""

from proofgym.record.rundir import (
    CONTRACT,
    SUMMARY,
    TRAJECTORIES,
    RunDirError,
    RunRecord,
    contract_id_of,
    load_run,
    read_trajectories,
    split_of,
    trajectory_from_record,
)

__all__ = ["CONTRACT", "SUMMARY", "TRAJECTORIES", "RunDirError", "RunRecord", "contract_id_of", "load_run",
           "read_trajectories", "split_of", "trajectory_from_record"]
