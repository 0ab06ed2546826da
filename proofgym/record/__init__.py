"""Records: trajectories, the rollout contract, and the crash-safe run store."""

from proofgym.record.contract import (
    ContractError,
    Difference,
    RolloutContract,
    apply_parity,
    diff_contracts,
    load_parity,
)
from proofgym.record.ids import stamp, trajectory_id_for
from proofgym.record.rundir import RunRecord, load_run
from proofgym.record.store import MAX_ATTEMPTS, RunStore, RunStoreError
from proofgym.record.trajectory import StepRecord, Trajectory

__all__ = ["MAX_ATTEMPTS", "ContractError", "Difference", "RolloutContract", "RunRecord", "RunStore",
           "RunStoreError", "StepRecord", "Trajectory", "apply_parity", "diff_contracts", "load_parity",
           "load_run", "stamp", "trajectory_id_for"]
