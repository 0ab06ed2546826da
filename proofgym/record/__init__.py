"""Records: trajectories and their provenance."""

from proofgym.record.trajectory import StepRecord, Trajectory

__all__ = ["StepRecord", "Trajectory"]
