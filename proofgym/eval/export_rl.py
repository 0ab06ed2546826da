"""``export --format rl``: token-exact RL records, with the reward, policy version and age.

One record per exportable episode whose model calls carried tokens (an ``OpenAIPolicy`` with
``record_tokens``, against a server that returns them: vLLM, SGLang, ``serve-scripted``):

* ``calls``: per model call, exactly what the server returned: ``prompt_ids``,
  ``completion_ids``, ``logprobs`` (one per completion token) and ``loss_mask`` (over prompt and
  completion: 1 for the tokens the policy generated).
* ``token_ids`` / ``loss_mask`` / ``logprobs``: the whole multi-turn episode as one sequence, built
  from the calls without re-tokenising: each call's prompt must extend everything before it (the
  previous prompt and completion); the new prompt tokens (tool outputs, user turns) get mask 0,
  each completion mask 1 and its log-probabilities (``None`` where the policy generated
  nothing). When a prompt does not extend what came before (the chat history was re-rendered
  differently from what the model generated: re-tokenisation drift), ``token_ids`` is ``None``
  and ``drift`` says at which call and token; the per-call records stay exact.
* ``reward``, ``policy_version`` (what the episode was sampled with), ``age`` (``current_version``
  minus it, when versions are training steps), and the provenance of every export.

``max_off_policy_steps`` leaves out episodes older than that (prime-rl's default is 8).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from proofgym.core import ConfigError
from proofgym.record import Trajectory


def policy_version(traj: Trajectory) -> str | None:
    version = traj.policy.get("version") if isinstance(traj.policy, dict) else None
    return None if version is None else str(version)


def _step(version: str | None, what: str) -> int:
    try:
        return int(str(version))
    except ValueError:
        raise ConfigError(f"{what} {version!r} is not a training step (an integer): trajectory age "
                          "needs integer policy versions (--policy-version STEP)") from None


def latest_version(trajectories: Iterable[Trajectory]) -> int | None:
    """The newest policy version among ``trajectories`` (integers only), or ``None``."""
    steps = [int(v) for t in trajectories if (v := policy_version(t)) is not None and v.lstrip("-").isdigit()]
    return max(steps) if steps else None


def sequence(calls: list[dict[str, Any]]) -> dict[str, Any]:
    """The episode's tokens as one sequence (see the module docstring)."""
    ids: list[int] = []
    mask: list[int] = []
    logprobs: list[float | None] = []
    for k, call in enumerate(calls):
        prompt, completion = call.get("prompt_ids"), call.get("completion_ids")
        if prompt is None or completion is None:
            return {"token_ids": None, "loss_mask": None, "logprobs": None,
                    "drift": {"call": k, "reason": "the server returned no token ids for this call"}}
        if prompt[:len(ids)] != ids:
            at = next((i for i, (a, b) in enumerate(zip(prompt, ids, strict=False)) if a != b),
                      min(len(prompt), len(ids)))
            return {"token_ids": None, "loss_mask": None, "logprobs": None,
                    "drift": {"call": k, "token": at, "reason": "this call's prompt does not extend the "
                              "previous prompt and completion (the history was re-rendered)"}}
        fresh = prompt[len(ids):]
        ids += fresh
        mask += [0] * len(fresh)
        logprobs += [None] * len(fresh)
        values = call.get("logprobs")
        ids += completion
        mask += [1] * len(completion)
        exact = values is not None and len(values) == len(completion)
        logprobs += list(values) if exact else [None] * len(completion)
    return {"token_ids": ids, "loss_mask": mask, "logprobs": logprobs, "drift": None}


def rl_records(trajectories: Iterable[Trajectory], *, exportable: Any, provenance: Any,
               current_version: int | None = None, max_off_policy_steps: int | None = None,
               include_heldout: bool = False) -> Iterator[dict[str, Any]]:
    """The ``rl`` records (see the module docstring). ``current_version`` defaults to the newest
    version in the run when ``max_off_policy_steps`` is given."""
    trajectories = list(trajectories)
    if max_off_policy_steps is not None and max_off_policy_steps < 0:
        raise ConfigError("--max-off-policy-steps must be >= 0")
    if current_version is None and max_off_policy_steps is not None:
        current_version = latest_version(trajectories)
        if current_version is None:
            raise ConfigError("--max-off-policy-steps needs integer policy versions on the trajectories "
                              "(or --current-version)")
    for traj in trajectories:
        if not exportable(traj, include_heldout=include_heldout):
            continue
        calls = [step.usage["tokens"] for step in traj.steps if isinstance(step.usage.get("tokens"), dict)]
        if not calls:
            continue
        version = policy_version(traj)
        age = None if current_version is None else current_version - _step(version, "policy version")
        if max_off_policy_steps is not None and age is not None and age > max_off_policy_steps:
            continue
        yield {**sequence(calls), "calls": calls, "reward": traj.reward, "policy_version": version,
               "age": age, **provenance(traj)}
