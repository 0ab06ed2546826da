"""Rollouts: policies and the episode loop."""

from proofgym.rollout.episode import run_episode
from proofgym.rollout.policies import (
    ControlPolicy,
    Policy,
    RandomPolicy,
    ReferencePolicy,
    ScriptedPolicy,
    ScriptRunner,
    make_policy,
)

__all__ = ["ControlPolicy", "Policy", "RandomPolicy", "ReferencePolicy", "ScriptRunner",
           "ScriptedPolicy", "make_policy", "run_episode"]
