"""Train on proofgym environments with TRL (``GRPOTrainer``); importable without TRL installed.

* :func:`environment_factory`: any proofgym env as TRL's ``environment_factory`` class (tools
  from the env's registry, calls through ``env.step``, sandboxes reused across resets).
* :class:`EnvironmentReward`: the reward function grading a whole batch of those environments
  concurrently through a ``VerifierPool``; grader errors are ``None`` (never trained on).
* :func:`close_environment`: close one instance now (not a method: TRL shows methods as tools).
* :func:`dataset`: the training rows (``prompt`` + ``task_id``) of a split, with the held-out guard.
* :class:`ProofgymReward`: single-turn, text-only grading of plain completions, through a
  ``VerifierPool`` too.
"""

from proofgym.integrations.trl.data import ProofgymReward, dataset, prompt_dataset
from proofgym.integrations.trl.environment import (
    MultiTurnNotSupported,
    ProofgymEnvironment,
    close_environment,
    environment_factory,
    trl_view,
)
from proofgym.integrations.trl.reward import EnvironmentReward, batch_metrics, final_message

__all__ = ["EnvironmentReward", "MultiTurnNotSupported", "ProofgymEnvironment", "ProofgymReward",
           "batch_metrics", "close_environment", "dataset", "environment_factory", "final_message",
           "prompt_dataset", "trl_view"]
