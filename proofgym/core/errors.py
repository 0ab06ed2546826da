"""The closed vocabularies of the contract: tool error kinds and truncation reasons.

They are plain string enums so that they serialise as themselves in records and ``info`` dicts.
"""

from __future__ import annotations

from enum import Enum


class ToolErrorKind(str, Enum):
    """Why a tool call produced an error observation instead of output."""

    UNKNOWN_TOOL = "unknown_tool"
    INVALID_ARGUMENTS = "invalid_arguments"
    EXECUTION_ERROR = "execution_error"
    TIMEOUT = "timeout"
    DENIED = "denied"
    # Faults of a remote service, as a real API reports them (SearchQA's tools simulate these).
    RATE_LIMITED = "rate_limited"
    SERVER_ERROR = "server_error"
    NOT_FOUND = "not_found"


class TruncationReason(str, Enum):
    """Which budget ended an episode that the task itself had not finished."""

    TURNS = "turns"
    TOOL_CALLS = "tool_calls"
    WALL_TIME = "wall_time"
    TOKENS = "tokens"
    COST = "cost"
    CONTEXT = "context"


class ProofgymError(Exception):
    """The root of every error proofgym raises (not of agent mistakes: those are observations).

    Each layer subclasses it (as httpx does): :class:`ConfigError` for bad input or settings,
    ``RunStoreError``/``ContractError`` (records), ``RolloutError`` (runs), ``RegradeError``
    (verify), ... ``exit_code`` is what the CLI exits with: 2 for a usage error (the default),
    1 for a run that failed.
    """

    exit_code = 2


class ConfigError(ProofgymError, ValueError):
    """A bad argument or setting: what was wrong is in the message, with what to do instead."""


class EnvBuildError(ConfigError):
    """An environment that could not be built: an unknown id, a ``module:`` prefix that does not
    import, or arguments its factory rejected (the factory's own message is quoted)."""


class EnvNotFoundError(EnvBuildError, LookupError):
    """An environment id that is not registered."""


class TaskNotFoundError(ProofgymError, KeyError):
    """A task id that the task set does not hold."""

    def __str__(self) -> str:  # KeyError would print the repr of the message
        return str(self.args[0]) if self.args else "task not found"


class EpisodeStateError(ProofgymError, RuntimeError):
    """The env was used out of order (``step`` before ``reset``, after the episode ended, ...)."""
