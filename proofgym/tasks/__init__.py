"""Task sets: the distribution of tasks an env draws from, its splits, the held-out guard and the
curriculum sampler."""

from proofgym.tasks.curriculum import Choice, Curriculum
from proofgym.tasks.loaders import MissingExtraError, TaskRecordError, dataset_records, read_jsonl_records
from proofgym.tasks.splits import (
    BURNED,
    DEFAULT_RATIOS,
    SPLITS,
    HeldOutError,
    SplitManifest,
    SplitManifestError,
    assign_split,
)
from proofgym.tasks.taskset import TaskSet

__all__ = ["BURNED", "DEFAULT_RATIOS", "SPLITS", "Choice", "Curriculum", "HeldOutError", "MissingExtraError",
           "SplitManifest",
           "SplitManifestError", "TaskRecordError", "TaskSet", "assign_split", "dataset_records",
           "read_jsonl_records"]
