"""Every error proofgym raises, in one tree rooted at :class:`ProofgymError` (as httpx does).

Each class lives in the module of the layer that raises it; this module names them all, so
``except proofgym.errors.ContractError`` works without knowing where a class is defined, and
``except proofgym.ProofgymError`` catches any of them. (Agent mistakes are not errors: they are
observations. A warning, ``TrainSplitWarning``, is not part of the tree.)

The tree (``exit_code``, what the CLI exits with, is 2, a usage error, except for RolloutError and
its subclass: 1, a run that failed)::

    ProofgymError
    ├── ConfigError (ValueError): a bad argument or setting
    │   ├── EnvBuildError > EnvNotFoundError, EnvArgError;  ComparisonError, SnapshotSourceError,
    │   │   UnknownToolError, TaskRecordError, MissingExtraError (ImportError), SamplingError
    ├── TaskNotFoundError (KeyError), EpisodeStateError
    ├── records: ContractError, RunStoreError
    ├── runs: RolloutError > RunFailedError; PolicyInfrastructureError, TransportError,
    │         RetriesExhausted, SlotLostError
    ├── tasks: HeldOutError, SplitManifestError; synthesis: FetchError, PatchError, RecipeError,
    │         StatementError, HistoryError
    ├── tools: ToolError, SearchError; integrations: MultiTurnNotSupported; testing: UnknownPrompt
    ├── serving (the wire): ServeError > CapacityError, WireError (ValueError); RemoteError
    ├── sandbox: SandboxSetupError > IdBusyError, ImageError;  LayerError (ValueError);
    │            LeaseTimeout (RuntimeError);
    │            UnsafeStateDirError (RuntimeError): state another user could change
    └── verify: PoolClosedError, RegradeError, GraderSpecError, HedgedAnswer, MathCheckStarved,
        JudgeError > JudgeTimeout, UngradedReply; TestSourceError, ArtifactRejected
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from proofgym.core.errors import (
    ConfigError,
    EnvBuildError,
    EnvNotFoundError,
    EpisodeStateError,
    ProofgymError,
    TaskNotFoundError,
)

if TYPE_CHECKING:  # for readers and type checkers; at run time each is imported on first use
    from proofgym.chat_client import RetriesExhausted, TransportError
    from proofgym.cli.env_args import EnvArgError
    from proofgym.cli.sampling_args import SamplingError
    from proofgym.envs.search_qa.corpus import SearchError
    from proofgym.eval.compare import ComparisonError
    from proofgym.integrations.trl.environment import MultiTurnNotSupported
    from proofgym.record.contract import ContractError
    from proofgym.record.rundir import RunStoreError
    from proofgym.remote import RemoteError
    from proofgym.rollout.openai_policy import PolicyInfrastructureError
    from proofgym.rollout.orchestrator import RolloutError, RunFailedError
    from proofgym.rollout.slots import SlotLostError
    from proofgym.runtimes.grading_lease import LeaseTimeout
    from proofgym.runtimes.private_dirs import UnsafeStateDirError
    from proofgym.runtimes.sandbox import (
        IdBusyError,
        ImageError,
        LayerError,
        SandboxSetupError,
        SnapshotSourceError,
        UnknownToolError,
    )
    from proofgym.tasks.loaders import MissingExtraError, TaskRecordError
    from proofgym.tasks.splits import HeldOutError, SplitManifestError
    from proofgym.tasks.synth import FetchError, PatchError, RecipeError
    from proofgym.tasks.synth.history import HistoryError
    from proofgym.tasks.synth.statements import StatementError
    from proofgym.testing.scripts import UnknownPrompt
    from proofgym.tools.result import ToolError
    from proofgym.verify.graders import (
        GraderSpecError,
        HedgedAnswer,
        JudgeError,
        JudgeTimeout,
        MathCheckStarved,
        UngradedReply,
    )
    from proofgym.verify.pool import PoolClosedError
    from proofgym.verify.regrade import RegradeError
    from proofgym.verify.sandboxed import ArtifactRejected, TestSourceError
    from proofgym.wire import CapacityError, ServeError, WireError


#: where each class is defined (imported on first use: some layers take seconds to load)
_WHERE = {
    "EnvArgError": "proofgym.cli.env_args",
    "SamplingError": "proofgym.cli.sampling_args",
    "SearchError": "proofgym.envs.search_qa.corpus",
    "ComparisonError": "proofgym.eval.compare",
    "MultiTurnNotSupported": "proofgym.integrations.trl.environment",
    "ContractError": "proofgym.record.contract",
    "RunStoreError": "proofgym.record.rundir",
    "RemoteError": "proofgym.remote",
    "ServeError": "proofgym.wire",
    "CapacityError": "proofgym.wire",
    "WireError": "proofgym.wire",
    "TransportError": "proofgym.chat_client",
    "RetriesExhausted": "proofgym.chat_client",
    "PolicyInfrastructureError": "proofgym.rollout.openai_policy",
    "RolloutError": "proofgym.rollout.orchestrator",
    "RunFailedError": "proofgym.rollout.orchestrator",
    "SlotLostError": "proofgym.rollout.slots",
    "IdBusyError": "proofgym.runtimes.sandbox",
    "ImageError": "proofgym.runtimes.sandbox",
    "LayerError": "proofgym.runtimes.sandbox",
    "SnapshotSourceError": "proofgym.runtimes.sandbox",
    "SandboxSetupError": "proofgym.runtimes.sandbox",
    "UnknownToolError": "proofgym.runtimes.sandbox",
    "UnsafeStateDirError": "proofgym.runtimes.private_dirs",
    "TaskRecordError": "proofgym.tasks.loaders",
    "MissingExtraError": "proofgym.tasks.loaders",
    "HeldOutError": "proofgym.tasks.splits",
    "SplitManifestError": "proofgym.tasks.splits",
    "FetchError": "proofgym.tasks.synth",
    "PatchError": "proofgym.tasks.synth",
    "RecipeError": "proofgym.tasks.synth",
    "StatementError": "proofgym.tasks.synth.statements",
    "HistoryError": "proofgym.tasks.synth.history",
    "LeaseTimeout": "proofgym.runtimes.grading_lease",
    "UnknownPrompt": "proofgym.testing.scripts",
    "ToolError": "proofgym.tools.result",
    "HedgedAnswer": "proofgym.verify.graders",
    "MathCheckStarved": "proofgym.verify.graders",
    "JudgeError": "proofgym.verify.graders",
    "JudgeTimeout": "proofgym.verify.graders",
    "UngradedReply": "proofgym.verify.graders",
    "GraderSpecError": "proofgym.verify.graders",
    "PoolClosedError": "proofgym.verify.pool",
    "RegradeError": "proofgym.verify.regrade",
    "TestSourceError": "proofgym.verify.sandboxed",
    "ArtifactRejected": "proofgym.verify.sandboxed",
}


def __getattr__(name: str) -> type[ProofgymError]:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'proofgym.errors' has no attribute {name!r}")


__all__ = [
    "ArtifactRejected",
    "CapacityError",
    "ComparisonError",
    "ConfigError",
    "ContractError",
    "EnvArgError",
    "EnvBuildError",
    "EnvNotFoundError",
    "EpisodeStateError",
    "FetchError",
    "GraderSpecError",
    "HedgedAnswer",
    "HeldOutError",
    "HistoryError",
    "IdBusyError",
    "ImageError",
    "JudgeError",
    "JudgeTimeout",
    "LayerError",
    "LeaseTimeout",
    "MathCheckStarved",
    "MissingExtraError",
    "MultiTurnNotSupported",
    "PatchError",
    "PolicyInfrastructureError",
    "PoolClosedError",
    "ProofgymError",
    "RecipeError",
    "RegradeError",
    "RemoteError",
    "RetriesExhausted",
    "RolloutError",
    "RunFailedError",
    "RunStoreError",
    "SamplingError",
    "SandboxSetupError",
    "SearchError",
    "ServeError",
    "SlotLostError",
    "SnapshotSourceError",
    "SplitManifestError",
    "StatementError",
    "TaskNotFoundError",
    "TaskRecordError",
    "TestSourceError",
    "ToolError",
    "TransportError",
    "UngradedReply",
    "UnknownPrompt",
    "UnknownToolError",
    "UnsafeStateDirError",
    "WireError",
]
