"""Rollouts: policies, the episode model (plan, recorder, sinks, recording), the episode loop
and the async orchestrator."""

from proofgym.rollout.async_policy import (
    AsyncPolicy,
    PolicySession,
    PolicyStep,
    SyncPolicyAdapter,
    as_async_policy,
    is_async_policy,
)
from proofgym.rollout.episode import play_plan, play_plan_async, run_episode
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
from proofgym.rollout.recorder import EpisodePlan, EpisodeRecorder, MemorySink, Sink
from proofgym.rollout.recording import Recording

__all__ = ["AsyncPolicy", "ControlPolicy", "EpisodePlan", "EpisodeRecorder", "MemorySink", "OpenAIPolicy",
           "Orchestrator", "Policy", "PolicyInfrastructureError", "PolicySession", "PolicyStep",
           "RandomPolicy", "Recording", "ReferencePolicy", "ScriptRunner", "ScriptedPolicy", "Sink",
           "SyncPolicyAdapter", "as_async_policy", "is_async_policy", "make_policy", "play_plan",
           "play_plan_async", "run_episode"]


def __getattr__(name: str) -> object:
    # The openai client takes most of a second to import: load it only when it is used.
    if name in ("OpenAIPolicy", "PolicyInfrastructureError"):
        from proofgym.rollout import openai_policy

        return getattr(openai_policy, name)
    raise AttributeError(f"module 'proofgym.rollout' has no attribute {name!r}")
