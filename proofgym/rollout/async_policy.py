"""The async policy protocol: one policy, many episodes at once, each in its own session.

A sync :class:`~proofgym.rollout.policies.Policy` keeps one episode's state on itself, so it can
play one episode at a time. The orchestrator runs many, so an :class:`AsyncPolicy` hands out a
:class:`PolicySession` per episode; the session holds that episode's state (a chat history, a
script position) and its ``act`` is a coroutine (a model call waits on the network).
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from gymnasium import spaces

from proofgym.core import AgentAction, Task
from proofgym.rollout.policies import Policy


@dataclass
class PolicyStep:
    """The next action, and what producing it cost (tokens, latency, retries, finish reason).

    ``usage["total_tokens"]`` is charged to the env's token budget and ``usage`` is recorded on
    the step (``StepRecord.usage``).
    """

    action: AgentAction
    usage: dict[str, Any] = field(default_factory=dict)


class PolicySession(Protocol):
    """One episode of a policy. ``act`` is called with each observation, in order."""

    async def act(self, observation: Mapping[str, Any]) -> PolicyStep: ...

    async def aclose(self) -> None: ...


@runtime_checkable
class AsyncPolicy(Protocol):
    """A policy that can play many episodes concurrently.

    ``start_episode`` is called after each ``reset`` (the task is given for scripted policies;
    model policies must only use the observation). ``describe()`` is recorded on every trajectory
    and must identify the policy exactly, including its ``version`` (a checkpoint, a step).
    """

    async def start_episode(self, task: Task, observation: Mapping[str, Any], info: Mapping[str, Any],
                            action_space: spaces.Space) -> PolicySession: ...

    def describe(self) -> dict[str, Any]: ...


class _SyncSession:
    def __init__(self, policy: Policy) -> None:
        self.policy = policy

    async def act(self, observation: Mapping[str, Any]) -> PolicyStep:
        return PolicyStep(self.policy.act(observation))

    async def aclose(self) -> None:
        return None


class SyncPolicyAdapter:
    """Runs a sync :class:`Policy` (reference, scripted, random, control) under the orchestrator.

    Each episode gets its own copy of the policy (``copy.copy``) or, when given a factory, a fresh
    instance, so concurrent episodes never share per-episode state. ``act`` runs on the event loop:
    the adapted policies are cheap (a script step); a slow sync policy should be made async instead.
    """

    def __init__(self, policy: Policy | Callable[[], Policy]) -> None:
        self._factory: Callable[[], Policy] = (
            (lambda: copy.copy(policy)) if isinstance(policy, Policy) else policy  # type: ignore[assignment]
        )
        sample = self._factory()
        self._described = sample.describe()
        self._takes_seed = "seed" in inspect.signature(sample.start).parameters

    async def start_episode(self, task: Task, observation: Mapping[str, Any], info: Mapping[str, Any],
                            action_space: spaces.Space, *, seed: int | None = None) -> _SyncSession:
        """Start an episode on a fresh copy; a policy whose ``start`` takes ``seed=`` gets the
        episode's seed (its randomness then depends on that, never on the copy or the slot)."""
        policy = self._factory()
        if self._takes_seed:
            policy.start(task, observation, info, action_space, seed=seed)  # type: ignore[call-arg]
        else:
            policy.start(task, observation, info, action_space)
        return _SyncSession(policy)

    def describe(self) -> dict[str, Any]:
        return dict(self._described)


def is_async_policy(policy: object) -> bool:
    """True for an :class:`AsyncPolicy` (its ``start_episode`` is a coroutine function)."""
    return inspect.iscoroutinefunction(getattr(policy, "start_episode", None))


def as_async_policy(policy: AsyncPolicy | Policy) -> AsyncPolicy:
    """``policy`` itself if it is async, else a :class:`SyncPolicyAdapter` around it."""
    if is_async_policy(policy):
        return policy  # type: ignore[return-value]
    if isinstance(policy, Policy):
        return SyncPolicyAdapter(policy)
    raise TypeError(f"{type(policy).__name__} is not a policy: it needs start_episode() (async) or "
                    "start()/act()/describe() (sync)")
