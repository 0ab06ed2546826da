"""``EnvironmentReward``: grade a whole TRL batch of proofgym episodes at once, out of band.

TRL calls a reward function once per generation batch with ``environments=`` (the pooled
instances of :func:`~proofgym.integrations.trl.environment_factory`, one per completion). This
one ends each episode with the model's final message, freezes it (``VerificationJob``) and
submits every job of the batch to a :class:`~proofgym.verify.VerifierPool` before waiting for
any, so graders run concurrently (one call per batch, not per completion).

Grader errors never train: a verdict with ``status="error"`` (or ``unscored``) is returned as
``None``. TRL 1.16 treats a completion for which every reward function returned ``None`` as
unscorable: it is left out of its group's baseline and its advantage is set to 0, so it moves no
parameter (``tests/integrations/trl/test_grpo.py`` checks the gradient). With *other* reward
functions next to this one, TRL would still train the row on their rewards: wrap them with
:meth:`EnvironmentReward.gate` so they return ``None`` where the grader failed.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from proofgym.core import ToolCallAction, Verdict
from proofgym.core.errors import ConfigError
from proofgym.integrations.trl.environment import ProofgymEnvironment
from proofgym.verify.pool import VerifierPool

log = logging.getLogger(__name__)


class LazyPool:
    """The :class:`VerifierPool` of a TRL reward function: made on first use and closed by
    :meth:`close`, when its owner is garbage collected, or at interpreter exit, whichever comes
    first (trainers and the docs' recipes never close their reward functions). A pool passed
    in is the caller's: used, never closed. A pickled copy makes its own pool on first use."""

    def __init__(self, backend: str | None, processes: int, timeout_s: float,
                 pool: VerifierPool | None = None) -> None:
        self.backend, self.processes, self.timeout_s = backend, processes, timeout_s
        self._given = pool
        self._pool: VerifierPool | None = None
        self._finalizer: weakref.finalize | None = None  # type: ignore[type-arg]
        self._lock = threading.Lock()

    def get(self) -> VerifierPool:
        if self._given is not None:
            return self._given
        with self._lock:
            if self._pool is None:
                self._pool = VerifierPool(self.backend, processes=self.processes,  # type: ignore[arg-type]
                                          timeout_s=self.timeout_s)
                # the callback holds the pool, not this object: this object can still be collected,
                # and a finalizer also runs at interpreter exit (workers, their sandboxes go)
                self._finalizer = weakref.finalize(self, self._pool.close)
            return self._pool

    def close(self) -> None:
        with self._lock:
            finalizer, self._pool, self._finalizer = self._finalizer, None, None
        if finalizer is not None:
            finalizer()  # closes the pool, once

    def __getstate__(self) -> dict[str, Any]:
        return {"backend": self.backend, "processes": self.processes, "timeout_s": self.timeout_s}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]


class EnvironmentReward:
    """A TRL reward function for the environments of :func:`environment_factory`.

    Args:
        backend: The :class:`VerifierPool` backend (default: the run default, ``process``:
            crash-isolated workers).
        processes: Grading processes.
        timeout_s: Per-job grading time limit (a job over it is a grader error: ``None``).
        pool: An existing pool to use instead (it is not closed by :meth:`close`).
        record_dir: Record every graded episode in this run directory (as
            ``environment_factory(..., record_dir=)`` does), with the trainer's step
            (``trainer_state.global_step``) as its policy version.

    Its own pool is closed by :meth:`close`, when the function is garbage collected, or at
    interpreter exit: no grader process outlives it.

    After each call :attr:`last_verdicts` holds the batch's verdicts. Through TRL's
    ``log_metric`` it logs ``proofgym/<component>`` and ``proofgym/<metric>`` (means over scored
    completions), ``proofgym/grader_error_rate`` and ``proofgym/tool_error_rate``; through
    ``log_extra`` the columns ``proofgym_status`` and ``proofgym_error``.

    It pickles (the pool is not pickled; the copy starts its own on first use), so TRL's async
    trainer can ship it to its rollout process.
    """

    def __init__(self, *, backend: str | None = None, processes: int = 2, timeout_s: float = 300.0,
                 pool: VerifierPool | None = None, record_dir: str | Path | None = None) -> None:
        self.backend, self.processes, self.timeout_s = backend, processes, timeout_s
        self.record_dir = str(record_dir) if record_dir is not None else None
        self._grader = LazyPool(backend, processes, timeout_s, pool)
        self.last_verdicts: list[Verdict] = []
        self.__name__ = "proofgym"  # TRL names the reward column after it

    def __getstate__(self) -> dict[str, Any]:
        return {"backend": self.backend, "processes": self.processes, "timeout_s": self.timeout_s,
                "record_dir": self.record_dir}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]

    @property
    def pool(self) -> VerifierPool:
        return self._grader.get()

    def close(self) -> None:
        """Close the pool this function made (a later call makes a new one)."""
        self._grader.close()

    def __call__(self, prompts: Sequence[Any] | None = None, completions: Sequence[Any] = (),
                 environments: Sequence[ProofgymEnvironment] | None = None,
                 log_metric: Callable[[str, float], None] | None = None,
                 log_extra: Callable[[str, list[Any]], None] | None = None,
                 trainer_state: Any = None, completion_ids: Sequence[Sequence[int]] | None = None,
                 **_: Any) -> list[float | None]:
        if environments is None:
            raise ConfigError("no environments= were passed: use this reward function with "
                              "GRPOTrainer(environment_factory=proofgym.integrations.trl."
                              "environment_factory(...))")
        if len(environments) != len(completions):
            raise ConfigError(f"got {len(completions)} completions for {len(environments)} environments")
        step = getattr(trainer_state, "global_step", None)
        verdicts = self.grade(environments, [final_message(c) for c in completions],
                              policy_version=step if isinstance(step, int) else None,
                              completion_ids=completion_ids)
        self.last_verdicts = verdicts
        if log_metric is not None:
            for name, value in batch_metrics(verdicts, environments).items():
                log_metric(name, value)
        if log_extra is not None:
            log_extra("proofgym_status", [v.status for v in verdicts])
            log_extra("proofgym_error", [v.error or "" for v in verdicts])
        return [v.reward if v.scored else None for v in verdicts]

    def grade(self, environments: Sequence[ProofgymEnvironment], finals: Sequence[str | None], *,
              policy_version: int | None = None,
              completion_ids: Sequence[Sequence[int]] | None = None) -> list[Verdict]:
        """End each episode with its final message, grade them all concurrently, and deliver
        each through its environment's recording (its run directory, if one was asked for),
        sampled at ``policy_version`` (the trainer's step)."""
        jobs = [env._finish(final) for env, final in zip(environments, finals, strict=True)]
        if self.record_dir is not None:
            for env in environments:
                env._record_in(self.record_dir)
        verdicts = self.pool.grade_batch(jobs, [str(env.episode_id) for env in environments])
        verifier = self.pool.describe()
        for i, (env, verdict, job) in enumerate(zip(environments, verdicts, jobs, strict=True)):
            if verdict.status == "error":
                log.warning("grader error on %s (not trained on): %s", env.episode_id, verdict.error)
            # TRL's completion tokens (tool results included; it passes reward functions no
            # prompt ids): what an `export --format rl` record can say about this episode
            tokens = None if completion_ids is None else {
                "prompt_ids": None, "completion_ids": [int(t) for t in completion_ids[i]], "logprobs": None,
                "source": "trl completion_ids"}
            env._record(verdict, job, policy_version=policy_version, verifier=verifier, tokens=tokens)
        return verdicts

    def gate(self, reward_func: Callable[..., Sequence[float | None]]) -> Callable[..., list[float | None]]:
        """``reward_func`` returning ``None`` wherever this function's last verdict was not scored
        (list it *after* this one in ``reward_funcs``: TRL calls them in order)."""
        def gated(*args: Any, **kwargs: Any) -> list[float | None]:
            values = list(reward_func(*args, **kwargs))
            if len(values) != len(self.last_verdicts):
                raise ConfigError("gate(): list the gated reward function after the proofgym "
                                  "reward function in reward_funcs")
            return [None if not v.scored else r for r, v in zip(values, self.last_verdicts, strict=True)]
        gated.__name__ = getattr(reward_func, "__name__", "gated")
        return gated


def final_message(completion: Any) -> str | None:
    """The model's final message in a TRL completion: the content of the last assistant message
    when it made no tool call, else ``None`` (the rollout stopped before the model answered)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion:
        last = completion[-1]
        if isinstance(last, Mapping) and last.get("role") == "assistant" and not last.get("tool_calls"):
            content = last.get("content")
            if isinstance(content, list):  # content parts
                return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
            return str(content or "")
        return None
    raise TypeError(f"cannot read a completion from {type(completion).__name__}")


def batch_metrics(verdicts: Sequence[Verdict],
                  environments: Sequence[ProofgymEnvironment] = ()) -> dict[str, float]:
    """Means of every verdict component and metric over the scored verdicts, the grader error
    rate over all, and the share of tool calls that got an error observation."""
    scored = [v for v in verdicts if v.scored]
    out: dict[str, float] = {
        "proofgym/grader_error_rate": (len(verdicts) - len(scored)) / len(verdicts) if verdicts else 0.0,
    }
    sums: dict[str, list[float]] = {}
    for v in scored:
        for name, value in {**v.components, **v.metrics}.items():
            sums.setdefault(f"proofgym/{name}", []).append(float(value))
    out.update({name: sum(values) / len(values) for name, values in sums.items()})
    calls = [s for env in environments for s in env.trace_steps if isinstance(s.action, ToolCallAction)]
    if calls:
        out["proofgym/tool_error_rate"] = sum(s.observation_type == "tool_error" for s in calls) / len(calls)
    return out
