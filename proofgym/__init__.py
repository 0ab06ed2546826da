"""proofgym: verifiable RL environments for LLM agents.

The Gymnasium contract (``reset``/``step``, spaces, ``gymnasium.make``) plus what LLM training
needs: tool calls as actions, turn boundaries, sandboxed tools and out-of-band verification.
"""

from proofgym.core import (
    AgentAction,
    Limits,
    Task,
    TaskSpec,
    ToolCallAction,
    Trace,
    TurnCompleteAction,
    Verdict,
)
from proofgym.env import UniversalVerifiableEnv, VerificationJob
from proofgym.envs import register_envs
from proofgym.runtimes import Artifact, InProcessRuntime, Runtime
from proofgym.runtimes.sandbox import SandboxLimits, SandboxRuntime
from proofgym.tasks import TaskSet
from proofgym.tools import Tool, ToolError, ToolRegistry, ToolResult, tool
from proofgym.version import __version__

register_envs()


def __getattr__(name: str) -> object:
    # Rubric's package pulls in math-verify (sympy, ~0.5 s): load it on first use, not on import.
    if name == "Rubric":
        from proofgym.verify.rubric import Rubric

        return Rubric
    raise AttributeError(f"module 'proofgym' has no attribute {name!r}")

__all__ = [
    "AgentAction",
    "Artifact",
    "InProcessRuntime",
    "Limits",
    "Rubric",
    "Runtime",
    "SandboxLimits",
    "SandboxRuntime",
    "Task",
    "TaskSet",
    "TaskSpec",
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
    "__version__",
    "tool",
]
