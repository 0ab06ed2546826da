"""Records: trajectories, the rollout contract, and the crash-safe run store."""

from proofgym.record.contract import (
    ContractError,
    Difference,
    RolloutContract,
    apply_parity,
    diff_contracts,
    load_parity,
)
from proofgym.record.store import RunStore, RunStoreError, trajectory_id_for
from proofgym.record.trajectory import StepRecord, Trajectory

__all__ = ["ContractError", "Difference", "RolloutContract", "RunStore", "RunStoreError", "StepRecord",
           "Trajectory", "apply_parity", "diff_contracts", "load_parity", "trajectory_id_for"]
