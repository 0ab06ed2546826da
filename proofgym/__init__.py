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

__all__ = [
    "AgentAction",
    "Artifact",
    "InProcessRuntime",
    "Limits",
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
