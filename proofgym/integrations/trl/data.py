"""Training rows for TRL, and the single-turn text reward function.

:func:`dataset` gives the rows ``GRPOTrainer`` trains on (``prompt`` + ``task_id``), refusing
held-out tasks unless asked. :class:`ProofgymReward` grades a plain-text completion as a whole
single-turn episode (no tools), through a :class:`~proofgym.verify.pool.VerifierPool`; for tools
and sandboxes use
:func:`~proofgym.integrations.trl.environment_factory` with
:class:`~proofgym.integrations.trl.EnvironmentReward`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from proofgym.core import Trace, TraceStep, TurnCompleteAction, Verdict
from proofgym.core.errors import ConfigError, MultiTurnNotSupported
from proofgym.env import UniversalVerifiableEnv, VerificationJob
from proofgym.integrations.trl.environment import is_multi_turn
from proofgym.integrations.trl.reward import LazyPool
from proofgym.make import make_env
from proofgym.tasks.splits import SPLITS
from proofgym.verify.pool import VerifierPool

log = logging.getLogger(__name__)


def dataset(env: UniversalVerifiableEnv | str, split: str = "train", *,
            system_prompt: str | None = None, allow_heldout: bool = False,
            **env_options: Any) -> list[dict[str, Any]]:
    """The rows of one split of ``env``'s task set: ``{"prompt": [messages], "task_id": id}``.

    The last message is the task's spec prompt exactly (after an optional system message), so
    ``environment_factory``'s ``reset`` adds nothing to it. Pass the list to
    ``datasets.Dataset.from_list``.

    Args:
        env: The env, or a registered env id (built with ``env_options``).
        split: ``train``, ``dev`` or ``heldout`` (the task set's frozen split manifest).
        system_prompt: A system message put first.
        allow_heldout: Needed for any split but ``train``: training on dev or held-out tasks
            spends them (their numbers are no longer clean).

    Raises:
        HeldOutError: ``split`` is not ``train`` and ``allow_heldout`` is not set.
    """
    if isinstance(env, str):
        built = make_env(env, **env_options)
        try:
            return dataset(built, split, system_prompt=system_prompt, allow_heldout=allow_heldout)
        finally:
            built.close()
    if env.tasks is None:
        raise ConfigError("the env has no task set; build it with tasks=TaskSet(...)")
    if split not in SPLITS:
        raise ConfigError(f"unknown split {split!r}; use one of {list(SPLITS)}")
    ids = env.tasks.manifest.pool(split)
    if split != "train" and not allow_heldout:
        env.tasks.manifest.check_training(ids)  # raises HeldOutError naming the tasks
    return prompt_dataset(env, system_prompt=system_prompt, task_ids=ids, allow_heldout=True)


def prompt_dataset(env: UniversalVerifiableEnv, *, system_prompt: str | None = None,
                   task_ids: Sequence[str] | None = None,
                   allow_heldout: bool = False) -> list[dict[str, Any]]:
    """Rows ``{"prompt": [chat messages], "task_id": id}`` for ``datasets.Dataset.from_list``.

    The ``task_id`` column reaches the reward function as a keyword argument, which is how a
    completion is matched back to the task that grades it. ``task_ids`` defaults to the train
    split (every task with ``allow_heldout=True``); a dev or held-out id among them raises
    :class:`~proofgym.tasks.HeldOutError` unless ``allow_heldout`` (training on it spends it).
    """
    if env.tasks is None:
        raise ConfigError("the env has no task set; build it with tasks=TaskSet(...)")
    if task_ids is None:
        task_ids = env.tasks.ids if allow_heldout else env.tasks.manifest.pool("train")
    elif not allow_heldout:
        env.tasks.manifest.check_training(list(task_ids))
    rows = []
    for task_id in task_ids:
        spec = env.tasks.get(task_id).get_spec()
        messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
        messages.append({"role": "user", "content": spec.prompt})
        rows.append({"prompt": messages, "task_id": task_id})
    return rows


class ProofgymReward:
    """A TRL reward function grading each completion with its task's own grader.

    Returns ``None`` for a completion whose grading failed (``Verdict.status == "error"``): as
    TRL's only reward function, TRL 1.16 then gives the completion no advantage and leaves it out of
    its group's baseline, where a 0.0 would teach the model that a correct answer was wrong.
    Every verdict of the last call is kept in :attr:`last_verdicts` for logging.

    Each call plays one episode per completion in ``env`` (here), then grades them all at once
    in a :class:`~proofgym.verify.pool.VerifierPool`: a grader that raises, runs past
    ``timeout_s`` or kills its process (the default ``process`` backend) gives that completion
    an error verdict (``None``), and training goes on. Its own pool is closed by :meth:`close`,
    when the function is garbage collected, or at interpreter exit.

    Args:
        env: A single-turn env whose task set holds the dataset's tasks. It is used for one
            episode per completion (reset, one turn, verify), so the grader sees exactly what it
            sees in evaluation.
        on_verdict: Optional callback ``(task_id, completion, verdict)`` (e.g. to log components).
        backend: The pool's backend: ``process`` (the run default: crash-isolated workers; tasks
            must pickle) or ``inline`` (threads here).
        processes: Grading processes.
        timeout_s: Per-completion grading time limit.
        pool: An existing pool to use instead (it is not closed by :meth:`close`).
        allow_heldout: Grade dev and held-out tasks too; by default a call naming one raises
            :class:`~proofgym.tasks.HeldOutError` before anything is graded (a reward on it is
            a gradient on it), as :func:`dataset` and ``environment_factory`` refuse them.
    """

    def __init__(self, env: UniversalVerifiableEnv, *,
                 on_verdict: Callable[[str, str, Verdict], None] | None = None,
                 backend: str | None = None, processes: int = 2, timeout_s: float = 300.0,
                 pool: VerifierPool | None = None, allow_heldout: bool = False) -> None:
        if is_multi_turn(env):
            raise MultiTurnNotSupported(
                "ProofgymReward grades one completion as a whole single-turn episode, and this "
                "env's tasks answer turns with new messages (multi-turn): train it on `proofgym "
                "eval` trajectories exported with `proofgym export` instead")
        self.env = env
        self.on_verdict = on_verdict
        self.allow_heldout = allow_heldout
        self._grader = LazyPool(backend, processes, timeout_s, pool)
        self.last_verdicts: list[Verdict] = []
        self.__name__ = "proofgym_reward"  # TRL names reward columns after __name__

    @property
    def pool(self) -> VerifierPool:
        return self._grader.get()

    def close(self) -> None:
        """Close the pool this function made (a later call makes a new one)."""
        self._grader.close()

    def __call__(self, prompts: Sequence[Any] | None = None, completions: Sequence[Any] = (),
                 task_id: Sequence[str] = (), **_: Any) -> list[float | None]:
        if len(task_id) != len(completions):
            raise ConfigError(
                f"got {len(completions)} completions but {len(task_id)} task ids: keep the "
                "'task_id' column of prompt_dataset() in the training dataset"
            )
        texts = [_completion_text(c) for c in completions]
        self.last_verdicts = self.grade_all(list(task_id), texts)
        return [v.reward if v.scored else None for v in self.last_verdicts]

    def grade(self, task_id: str, completion: str) -> Verdict:
        """The verdict of one completion of ``task_id``."""
        return self.grade_all([task_id], [completion])[0]

    def grade_all(self, task_ids: Sequence[str], completions: Sequence[str]) -> list[Verdict]:
        """Play each completion as an episode, then grade them all concurrently in the pool."""
        if not self.allow_heldout and self.env.tasks is not None:
            self.env.tasks.manifest.check_training(list(task_ids))  # raises HeldOutError
        jobs = [self._episode(tid, text) for tid, text in zip(task_ids, completions, strict=True)]
        verdicts = self.pool.grade_batch(jobs, [f"trl/{tid}/{i}" for i, tid in enumerate(task_ids)])
        for tid, text, verdict in zip(task_ids, completions, verdicts, strict=True):
            if verdict.status == "error":
                log.warning("grader error on task %s: %s", tid, verdict.error)
            if self.on_verdict is not None:
                self.on_verdict(tid, text, verdict)
        return verdicts

    def _episode(self, task_id: str, completion: str) -> VerificationJob:
        """Play one completion as a whole episode and freeze it for grading."""
        obs, _ = self.env.reset(options={"task_id": task_id})
        action = TurnCompleteAction(completion)
        obs, _, terminated, truncated, _ = self.env.step(action)
        if not (terminated or truncated):
            raise MultiTurnNotSupported(f"task {task_id!r} is multi-turn: one completion does not end it; "
                                        "use the rollout orchestrator for multi-turn training data")
        return self.env.verification_job(Trace([TraceStep(action, obs)]))


def _completion_text(completion: Any) -> str:
    """TRL passes plain strings (standard format) or a list of messages (conversational)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content") or "")
    raise TypeError(f"cannot read a completion from {type(completion).__name__}")
