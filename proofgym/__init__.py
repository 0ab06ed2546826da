"""proofgym: verifiable RL environments for LLM agents.

The Gymnasium contract (``reset``/``step``, spaces, ``gymnasium.make``) plus what LLM training
needs: tool calls as actions, turn boundaries, sandboxed tools and out-of-band verification.
"""

from proofgym.core import (
    AgentAction,
    ConfigError,
    Limits,
    ProofgymError,
    Task,
    TaskSpec,
    ToolCallAction,
    Trace,
    TurnCompleteAction,
    Verdict,
)
from proofgym.env import UniversalVerifiableEnv, VerificationJob
from proofgym.envs import register_envs
from proofgym.make import make_env
from proofgym.runtimes import Artifact, InProcessRuntime, Runtime
from proofgym.tasks import TaskSet
from proofgym.tools import Tool, ToolError, ToolRegistry, ToolResult, tool
from proofgym.version import __version__

register_envs()

#: Heavier parts, imported on first use (the openai client and math-verify take seconds to load).
_LAZY = {"Orchestrator": "proofgym.rollout.orchestrator", "OpenAIPolicy": "proofgym.rollout.openai_policy",
         "VerifierPool": "proofgym.verify.pool", "Rubric": "proofgym.verify.graders",
         # the sandbox (bubblewrap, cgroups) is not needed by an in-process env's run
         "SandboxRuntime": "proofgym.runtimes.sandbox", "SandboxLimits": "proofgym.runtimes.sandbox",
         **dict.fromkeys(("run_pytest", "run_program", "TestRun", "ProgramRun"),
                         "proofgym.verify.sandboxed")}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'proofgym' has no attribute {name!r}")

__all__ = [
    "AgentAction",
    "Artifact",
    "ConfigError",
    "InProcessRuntime",
    "Limits",
    "OpenAIPolicy",
    "Orchestrator",
    "ProgramRun",
    "ProofgymError",
    "Rubric",
    "Runtime",
    "SandboxLimits",
    "SandboxRuntime",
    "Task",
    "TaskSet",
    "TaskSpec",
    "TestRun",
    "Tool",
    "ToolCallAction",
    "ToolError",
    "ToolRegistry",
    "ToolResult",
    "Trace",
    "TurnCompleteAction",
    "UniversalVerifiableEnv",
    "Verdict",
    "VerificationJob",
    "VerifierPool",
    "__version__",
    "make_env",
    "run_program",
    "run_pytest",
    "tool",
]
