"""A bubblewrap sandbox runtime: no network, a read-only minimal system, a copy-on-write
workspace over a read-only task snapshot, a trusted supervisor as pid 1, per-command limits."""

from proofgym.runtimes.sandbox.limits import SandboxLimits
from proofgym.runtimes.sandbox.runtime import SandboxRuntime
from proofgym.runtimes.sandbox.snapshot_source import SnapshotSourceError, materialize
from proofgym.runtimes.sandbox.system import MinimalSystem, SandboxSetupError
from proofgym.runtimes.sandbox.tools import DEFAULT_TOOLS, Sandbox, UnknownToolError

__all__ = ["DEFAULT_TOOLS", "MinimalSystem", "Sandbox", "SandboxLimits", "SandboxRuntime",
           "SandboxSetupError", "SnapshotSourceError", "UnknownToolError", "materialize"]
