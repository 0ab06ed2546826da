"""A bubblewrap sandbox runtime: no network, a read-only minimal system, a copy-on-write
workspace over a read-only task snapshot, a trusted supervisor as pid 1, per-command limits."""

from proofgym.runtimes.sandbox.box import SandboxHome, Spawned
from proofgym.runtimes.sandbox.limits import SandboxLimits
from proofgym.runtimes.sandbox.namespaces import IdBusyError
from proofgym.runtimes.sandbox.runtime import SandboxRuntime
from proofgym.runtimes.sandbox.shell import ansi_c_quote
from proofgym.runtimes.sandbox.snapshot_source import SnapshotSourceError, materialize
from proofgym.runtimes.sandbox.system import PYTEST_PACKAGES, MinimalSystem, SandboxSetupError
from proofgym.runtimes.sandbox.tools import DEFAULT_TOOLS, Sandbox, UnknownToolError

__all__ = ["DEFAULT_TOOLS", "PYTEST_PACKAGES", "IdBusyError", "MinimalSystem", "Sandbox", "SandboxHome",
           "SandboxLimits", "SandboxRuntime", "SandboxSetupError", "SnapshotSourceError", "Spawned",
           "UnknownToolError", "ansi_c_quote", "materialize"]
