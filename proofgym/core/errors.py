"""The closed vocabularies of the contract (tool error kinds, truncation reasons, the server's
error codes) and every error class proofgym defines, in one tree (as httpx's ``_exceptions.py``
and Gymnasium's ``error.py`` do). :mod:`proofgym.errors` is its public name.

The vocabularies are plain string enums so that they serialise as themselves in records, ``info``
dicts and wire frames.

The tree: one root, one base per layer; every other class derives from its layer's base, with a
builtin (``ValueError``, ``RuntimeError``, ...) as a second base where callers catch that.
``exit_code``, what the CLI exits with, is 2 (a usage error) except for :class:`RolloutError`
and :class:`RunFailedError`: 1, a run that failed::

    ProofgymError
    ├── ConfigError (ValueError): a bad argument or setting
    │   EnvBuildError > EnvNotFoundError (LookupError), EnvArgError; ComparisonError, SamplingError,
    │   SnapshotSourceError, UnknownToolError, TaskRecordError, MissingExtraError (ImportError),
    │   MultiTurnNotSupported, TaskFileNotFoundError (FileNotFoundError)
    ├── TaskError: tasks, their tools and episodes
    │   TaskNotFoundError (KeyError), EpisodeStateError, TaskSpecError, HeldOutError,
    │   SplitManifestError, ToolError, SearchError, UnknownPrompt (LookupError),
    │   ReferenceSolutionError; synthesis: FetchError, PatchError, RecipeError, StatementError,
    │   HistoryError, SuiteRunError
    ├── SandboxError: SandboxSetupError > IdBusyError, ImageError; LayerError, LeaseTimeout,
    │   UnsafeStateDirError
    ├── VerifyError: PoolClosedError, RegradeError, GraderSpecError, HedgedAnswer, MathCheckStarved,
    │   JudgeError > JudgeTimeout, UngradedReply; TestSourceError, ArtifactRejected, UngradableTask,
    │   EncodedValueError
    ├── RecordError: ContractError, RunStoreError
    ├── RolloutError (RuntimeError): RunFailedError > ErrorBudgetExceeded (exit 3);
    │   PolicyInfrastructureError, TransportError, RetriesExhausted, SlotLostError
    ├── ServeError: CapacityError, WireError (ValueError)
    └── RemoteError (RuntimeError)

Agent mistakes are not errors: they are observations. A warning, ``TrainSplitWarning``, is not
part of the tree.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from typing import Any


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


class Code(str, Enum):
    """The server's error codes on the wire: OpenEnv's ``WSErrorCode`` values, then proofgym's own."""

    INVALID_JSON = "INVALID_JSON"
    UNKNOWN_TYPE = "UNKNOWN_TYPE"
    VALIDATION_ERROR = "VALIDATION_ERROR"
    EXECUTION_ERROR = "EXECUTION_ERROR"
    CAPACITY_REACHED = "CAPACITY_REACHED"
    FACTORY_ERROR = "FACTORY_ERROR"
    SESSION_ERROR = "SESSION_ERROR"
    # proofgym's
    HELD_OUT = "HELD_OUT"
    UNAUTHORIZED = "UNAUTHORIZED"
    NOT_FOUND = "NOT_FOUND"
    DRAINING = "DRAINING"


class ProofgymError(Exception):
    """The root of every error proofgym raises (not of agent mistakes: those are observations).

    Only the layer bases derive from it directly. ``exit_code`` is what the CLI exits with: 2 for
    a usage error (the default), 1 for a run that failed.
    """

    exit_code = 2


# ------------------------------------------------------------------------------ layer bases
class ConfigError(ProofgymError, ValueError):
    """A bad argument or setting: what was wrong is in the message, with what to do instead."""


class TaskError(ProofgymError):
    """A task, its data, its tools or its episode could not be used as asked."""


class SandboxError(ProofgymError):
    """The sandbox (or the host state it keeps) could not be set up or used."""


class VerifyError(ProofgymError):
    """Grading could not run or could not reach a verdict (never a score of 0)."""


class RecordError(ProofgymError):
    """A record (run directory, contract, parity file) that cannot be read or written as asked."""


class RolloutError(ProofgymError, RuntimeError):
    """A run could not deliver its episodes (the sink or ``on_episode`` failed); it stopped."""

    exit_code = 1


class ServeError(ProofgymError):
    """A request the server refuses, with its wire :class:`Code` and a message safe to send."""

    def __init__(self, code: Code, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.code = code
        self.fields = fields

    def payload(self) -> dict[str, Any]:
        return {"message": str(self), "code": self.code.value, **self.fields}


class RemoteError(ProofgymError, RuntimeError):
    """The server refused a request or could not be reached; the message says which and why."""

    def __init__(self, message: str, code: str = "") -> None:
        super().__init__(message)
        self.code = code


# ------------------------------------------------------------------------------ config
class EnvBuildError(ConfigError):
    """An environment that could not be built: an unknown id, a ``module:`` prefix that does not
    import, or arguments its factory rejected (the factory's own message is quoted)."""


class EnvNotFoundError(EnvBuildError, LookupError):
    """An environment id that is not registered."""


class EnvArgError(EnvBuildError):
    """A ``--env-arg`` that names no parameter of the factory or whose value does not fit."""


class SamplingError(ConfigError):
    """A sampling setting that is malformed, out of range or reserved (a usage error, exit 2)."""


class ComparisonError(ConfigError):
    """Runs that cannot be compared as asked (different tasks or graders, nothing paired)."""


class SnapshotSourceError(ConfigError):
    """A snapshot source that cannot be used: an unsafe name, a link in an archive, too large, or
    not a directory, archive or mapping."""


class UnknownToolError(ConfigError):
    """A ``tools=`` entry that is neither a default tool's name nor a :class:`Tool`."""


class TaskRecordError(ConfigError):
    """A record that cannot become a task; the message names where it came from."""


class MissingExtraError(ConfigError, ImportError):
    """An optional dependency is not installed; the message names the install command."""


class MultiTurnNotSupported(ConfigError):
    """The env's tasks answer the agent with new user messages, which TRL's rollout cannot feed
    back (it ends a rollout at the first reply without tool calls)."""


class TaskFileNotFoundError(ConfigError, FileNotFoundError):
    """A task file or dataset directory that does not exist at the path given."""


# ------------------------------------------------------------------------------ tasks
class TaskNotFoundError(TaskError, KeyError):
    """A task id that the task set does not hold."""

    def __str__(self) -> str:  # KeyError would print the repr of the message
        return str(self.args[0]) if self.args else "task not found"


class EpisodeStateError(TaskError, RuntimeError):
    """The env was used out of order (``step`` before ``reset``, after the episode ended, ...)."""


class TaskSpecError(TaskError, ValueError):
    """A task whose spec the env cannot show: a prompt over the observation limit, or tool
    schemas that differ from the runtime's."""


class HeldOutError(TaskError):
    """A held-out (or dev) task was requested for training."""


class SplitManifestError(TaskError, ValueError):
    """A split manifest that is malformed or does not match its task set."""


class ToolError(TaskError):
    """Raised by a tool to fail with a typed error (e.g. ``denied``) and a message for the agent."""

    def __init__(self, message: str, kind: ToolErrorKind | str = ToolErrorKind.EXECUTION_ERROR):
        super().__init__(message)
        self.kind = ToolErrorKind(kind)


class SearchError(TaskError, ValueError):
    """A query the engine cannot run (no terms): the caller's mistake, said plainly."""


class UnknownPrompt(TaskError, LookupError):
    """The first user message is not the prompt of any task the script knows."""


class FetchError(TaskError):
    """An sdist that cannot be downloaded, does not match its pinned hash, or cannot be unpacked."""


class PatchError(TaskError, ValueError):
    """A patch that does not apply to the files it names."""


class RecipeError(TaskError, ValueError):
    """A recipe file that is malformed or names a project twice."""


class StatementError(TaskError, RuntimeError):
    """The writer's endpoint failed or wrote a report that quotes a hidden test."""


class HistoryError(TaskError):
    """A project that yields no release-history task, with the one-line reason."""


class ReferenceSolutionError(TaskError, RuntimeError):
    """A task's reference solution met an environment that does not answer as the task expects."""


class SuiteRunError(TaskError, RuntimeError):
    """A project's test suite did not run to its end when synthesis needed its baseline."""


# ------------------------------------------------------------------------------ sandbox
class SandboxSetupError(SandboxError, RuntimeError):
    """The host cannot provide what the sandbox needs (missing tool, package or kernel feature)."""


class IdBusyError(SandboxSetupError):
    """The leased uid still had a live process when the sandbox started (it did not start)."""


class ImageError(SandboxSetupError, ValueError):
    """An image that cannot be built or used: a bad lock, a bad archive, a failed download."""


class LayerError(SandboxError, ValueError):
    """A layer that is refused: unsafe entries, a bad archive or a digest that does not match."""


class LeaseTimeout(SandboxError, RuntimeError):
    """A lease was not granted within its deadline (an episode or grading of its key that never
    ends, or a wait in the very thread that would end it)."""


class UnsafeStateDirError(SandboxError, RuntimeError):
    """A directory proofgym would keep trusted state in could be changed by another user."""


# ------------------------------------------------------------------------------ verify
class PoolClosedError(VerifyError, RuntimeError):
    """A job was submitted to a :class:`VerifierPool` (or a call to daemon threads) that was
    already closed."""


class RegradeError(VerifyError, ValueError):
    """A re-grade that cannot run as asked (unknown verifier version, no task set)."""


class GraderSpecError(VerifyError, ValueError):
    """A grader spec (from a task file) that names no known grader or lacks an option, or a
    rubric that is misdefined or whose component returned what it declared it would not."""


class HedgedAnswer(VerifyError, ValueError):
    """The message commits to more than one distinct final answer."""


class MathCheckStarved(VerifyError, RuntimeError):
    """The math check did not finish in its wall-clock limit, and the checker process had not
    used its CPU budget: the host was busy (or the checker was stopped). Nothing was judged."""


class JudgeError(VerifyError, RuntimeError):
    """The judge's server returned no reply."""


class JudgeTimeout(JudgeError):
    """The judge's server did not reply within the judge's time limit (a busy or stalled server
    has not judged: a grader error, re-graded later, never a 0)."""


class UngradedReply(JudgeError):
    """The judge replied, but without a grade line."""


class TestSourceError(VerifyError, ValueError):
    """A test file that cannot be parsed, or a wanted test id that is not in its file."""


class ArtifactRejected(VerifyError):
    """Internal: the artifact could not be written into the grading workspace (its fault)."""


class UngradableTask(VerifyError, ValueError):
    """A task whose grading cannot tell a fix from a non-fix (no test has a mutant or a withheld
    check): the task's fault, never the agent's."""


class EncodedValueError(VerifyError, ValueError):
    """A value from a grading sandbox that is not in the plain-value encoding."""


# ------------------------------------------------------------------------------ records
class ContractError(RecordError, ValueError):
    """A contract or parity file that cannot be read, or a run whose contract does not match."""


class RunStoreError(RecordError, RuntimeError):
    """A run directory that cannot be used as asked (exists already, corrupt, locked, wrong
    contract, disk full)."""


# ------------------------------------------------------------------------------ rollout
class RunFailedError(RolloutError):
    """A run finished but failed as a whole: every episode ended in an error (or, as
    :class:`ErrorBudgetExceeded`, more went unscored than its budget allows). The run is
    recorded; ``trajectories`` and ``summary`` are what ``evaluate()`` would have returned."""

    def __init__(self, message: str, *, trajectories: Sequence[Any] = (),
                 summary: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.trajectories = list(trajectories)
        self.summary: dict[str, Any] = summary or {}


class ErrorBudgetExceeded(RunFailedError):
    """A larger share of the run's episodes went unscored (grader or episode errors) than its
    ``max_error_rate`` allows (``error_rate`` > ``max_error_rate``)."""

    exit_code = 3

    def __init__(self, message: str, *, error_rate: float, max_error_rate: float,
                 trajectories: Sequence[Any] = (), summary: dict[str, Any] | None = None) -> None:
        super().__init__(message, trajectories=trajectories, summary=summary)
        self.error_rate, self.max_error_rate = error_rate, max_error_rate


class PolicyInfrastructureError(RolloutError):
    """The model server could not answer (after every retry): an infrastructure failure, not a
    wrong answer. Episodes failing with it are errors, never scored."""

    exit_code = 2  # seen outside a run's end (a probe, a parity check): not a failed run


class TransportError(RolloutError):
    """A failed call. ``retryable``: a later try may succeed; ``retry_after``: the server's hint;
    ``timeout``: the server did not answer in time."""

    exit_code = 2  # a model-server call, also made by the judge and synthesis: not a failed run

    def __init__(self, description: str, *, retryable: bool, retry_after: float | None = None,
                 timeout: bool = False) -> None:
        super().__init__(description)
        self.description, self.retryable, self.retry_after = description, retryable, retry_after
        self.timeout = timeout


class RetriesExhausted(RolloutError):
    """Every try of a call failed with a retryable error; ``failures`` are their descriptions and
    ``last`` the final error."""

    exit_code = 2  # as TransportError

    def __init__(self, failures: list[str], last: TransportError) -> None:
        super().__init__(f"failed {len(failures)} times; last: {failures[-1]}")
        self.failures, self.last = failures, last


class SlotLostError(RolloutError):
    """An env slot's backend lost it mid-episode (an infrastructure fault, not the episode's)."""

    exit_code = 2  # one episode's fault, recorded as its error: not a failed run


# ------------------------------------------------------------------------------ serve
class CapacityError(ServeError):
    """The server holds ``max_sessions`` sessions: retry later (backpressure), or another server."""

    def __init__(self, active: int, limit: int) -> None:
        super().__init__(Code.CAPACITY_REACHED,
                         f"the server is at capacity ({active} of {limit} sessions); retry later",
                         active_sessions=active, max_sessions=limit)


class WireError(ServeError, ValueError):
    """A message that does not decode (not JSON, a missing or mistyped field): the server answers
    it with its code; a client gets it for a malformed reply (:mod:`proofgym.wire`)."""

    def __init__(self, message: str, code: Code = Code.VALIDATION_ERROR) -> None:
        super().__init__(code, message)
