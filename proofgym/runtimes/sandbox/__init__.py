"""A bubblewrap sandbox runtime: no network, a read-only system (the host-staged minimal system
or an environment image), a copy-on-write workspace over a read-only task snapshot, a trusted
supervisor as pid 1, per-command limits."""

from proofgym.runtimes.sandbox.box import SandboxHome, Spawned
from proofgym.runtimes.sandbox.images import (
    ImageError,
    LayerError,
    OciImage,
    PackagesImage,
    Pin,
    WheelLock,
    cache_root,
    default_system_modules,
    installed_modules,
    list_images,
    lock_packages,
    own_module_refusal,
    wheel_modules,
)
from proofgym.runtimes.sandbox.limits import SandboxLimits
from proofgym.runtimes.sandbox.namespaces import IdBusyError
from proofgym.runtimes.sandbox.runtime import SandboxRuntime
from proofgym.runtimes.sandbox.seccomp import GRADING_PROTECTED_PIDS, guard_program
from proofgym.runtimes.sandbox.shell import ansi_c_quote
from proofgym.runtimes.sandbox.snapshot_source import SnapshotSourceError, materialize
from proofgym.runtimes.sandbox.system import (
    PYTEST_PACKAGES,
    MinimalSystem,
    SandboxSetupError,
    SandboxSystem,
)
from proofgym.runtimes.sandbox.tools import DEFAULT_TOOLS, Sandbox, UnknownToolError

__all__ = ["DEFAULT_TOOLS", "GRADING_PROTECTED_PIDS", "PYTEST_PACKAGES", "IdBusyError", "ImageError",
           "LayerError", "MinimalSystem", "OciImage", "PackagesImage", "Pin", "Sandbox", "SandboxHome",
           "SandboxLimits", "SandboxRuntime", "SandboxSetupError", "SandboxSystem",
           "SnapshotSourceError", "Spawned", "UnknownToolError", "WheelLock", "ansi_c_quote",
           "cache_root", "default_system_modules", "guard_program", "installed_modules", "list_images",
           "lock_packages", "materialize", "own_module_refusal", "wheel_modules"]
