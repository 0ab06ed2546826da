"""Rollouts: policies, the episode loop and the async orchestrator."""

from proofgym.rollout.async_policy import (
    AsyncPolicy,
    PolicySession,
    PolicyStep,
    SyncPolicyAdapter,
    as_async_policy,
    is_async_policy,
)
from proofgym.rollout.episode import run_episode
from proofgym.rollout.orchestrator import Orchestrator
from proofgym.rollout.policies import (
    ControlPolicy,
    Policy,
    RandomPolicy,
    ReferencePolicy,
    ScriptedPolicy,
    ScriptRunner,
    make_policy,
)

__all__ = ["AsyncPolicy", "ControlPolicy", "OpenAIPolicy", "Orchestrator", "Policy",
           "PolicyInfrastructureError", "PolicySession", "PolicyStep", "RandomPolicy",
           "ReferencePolicy", "ScriptRunner", "ScriptedPolicy", "SyncPolicyAdapter",
           "as_async_policy", "is_async_policy", "make_policy", "run_episode"]


def __getattr__(name: str) -> object:
    # The openai client takes most of a second to import: load it only when it is used.
    if name in ("OpenAIPolicy", "PolicyInfrastructureError"):
        from proofgym.rollout import openai_policy

        return getattr(openai_policy, name)
    raise AttributeError(f"module 'proofgym.rollout' has no attribute {name!r}")
