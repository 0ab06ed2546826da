"""TRL integration: a proofgym task set as a GRPO prompt dataset and a reward function.

TRL's ``GRPOTrainer`` takes a dataset with a ``prompt`` column and reward functions called as
``fn(prompts=..., completions=..., **dataset_columns) -> list[float | None]``. Nothing here imports
TRL: the reward function is a plain callable, so it can be tested (and used by other trainers)
without it.

Only single-turn tasks fit this shape (one completion is the whole episode); multi-turn and tool
use belong to the rollout orchestrator, whose trajectories are exported for training instead.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from proofgym.core import Trace, TraceStep, TurnCompleteAction, Verdict
from proofgym.env import UniversalVerifiableEnv

log = logging.getLogger(__name__)


def prompt_dataset(env: UniversalVerifiableEnv, *, system_prompt: str | None = None,
                   task_ids: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Rows ``{"prompt": [chat messages], "task_id": id}`` for ``datasets.Dataset.from_list``.

    The ``task_id`` column reaches the reward function as a keyword argument, which is how a
    completion is matched back to the task that grades it.
    """
    if env.tasks is None:
        raise ValueError("the env has no task set; build it with tasks=TaskSet(...)")
    rows = []
    for task_id in task_ids if task_ids is not None else env.tasks.ids:
        spec = env.tasks.get(task_id).get_spec()
        messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
        messages.append({"role": "user", "content": spec.prompt})
        rows.append({"prompt": messages, "task_id": task_id})
    return rows


class ProofgymReward:
    """A TRL reward function grading each completion with its task's own grader.

    Returns ``None`` for a completion whose grading failed (``Verdict.status == "error"``): TRL
    ignores ``None`` rewards, where a 0.0 would silently teach the model that a correct answer
    was wrong. Every verdict of the last call is kept in :attr:`last_verdicts` for logging.

    Args:
        env: A single-turn env whose task set holds the dataset's tasks. It is used for one
            episode per completion (reset, one turn, verify), so the grader sees exactly what it
            sees in evaluation.
        on_verdict: Optional callback ``(task_id, completion, verdict)`` (e.g. to log components).
    """

    def __init__(self, env: UniversalVerifiableEnv, *,
                 on_verdict: Callable[[str, str, Verdict], None] | None = None) -> None:
        self.env = env
        self.on_verdict = on_verdict
        self.last_verdicts: list[Verdict] = []
        self.__name__ = "proofgym_reward"  # TRL names reward columns after __name__

    def __call__(self, prompts: Sequence[Any] | None = None, completions: Sequence[Any] = (),
                 task_id: Sequence[str] = (), **_: Any) -> list[float | None]:
        if len(task_id) != len(completions):
            raise ValueError(
                f"got {len(completions)} completions but {len(task_id)} task ids: keep the "
                "'task_id' column of prompt_dataset() in the training dataset"
            )
        self.last_verdicts = [self.grade(tid, _completion_text(c))
                              for tid, c in zip(task_id, completions, strict=True)]
        return [v.reward if v.scored else None for v in self.last_verdicts]

    def grade(self, task_id: str, completion: str) -> Verdict:
        obs, _ = self.env.reset(options={"task_id": task_id})
        action = TurnCompleteAction(completion)
        obs, _, terminated, truncated, _ = self.env.step(action)
        if not (terminated or truncated):
            raise ValueError(f"task {task_id!r} is multi-turn: one completion does not end it; "
                             "use the rollout orchestrator for multi-turn training data")
        verdict = self.env.verify(Trace([TraceStep(action, obs)]))
        if verdict.status == "error":
            log.warning("grader error on task %s: %s", task_id, verdict.error)
        if self.on_verdict is not None:
            self.on_verdict(task_id, completion, verdict)
        return verdict


def _completion_text(completion: Any) -> str:
    """TRL passes plain strings (standard format) or a list of messages (conversational)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content") or "")
    raise TypeError(f"cannot read a completion from {type(completion).__name__}")
