"""The contract. Depends on nothing else in proofgym."""

from proofgym.core.actions import AgentAction, ToolCallAction, TurnCompleteAction, action_from_dict
from proofgym.core.errors import (
    ConfigError,
    EnvBuildError,
    EnvNotFoundError,
    EpisodeStateError,
    ProofgymError,
    TaskNotFoundError,
    ToolErrorKind,
    TruncationReason,
)
from proofgym.core.grading import grade
from proofgym.core.limits import Limits
from proofgym.core.spec import TaskSpec
from proofgym.core.task import ActionScript, Task
from proofgym.core.trace import Trace, TraceStep
from proofgym.core.verdict import Verdict, coerce_verdict, describe_exception

__all__ = [
    "ActionScript",
    "AgentAction",
    "ConfigError",
    "EnvBuildError",
    "EnvNotFoundError",
    "EpisodeStateError",
    "Limits",
    "ProofgymError",
    "Task",
    "TaskNotFoundError",
    "TaskSpec",
    "ToolCallAction",
    "ToolErrorKind",
    "Trace",
    "TraceStep",
    "TruncationReason",
    "TurnCompleteAction",
    "Verdict",
    "action_from_dict",
    "coerce_verdict",
    "describe_exception",
    "grade",
]
