"""Resource limits of a sandbox: per command and per episode."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from proofgym.core.errors import ConfigError


@dataclass(frozen=True)
class SandboxLimits:
    """What one sandboxed command, and one episode, may use.

    Attributes:
        command_timeout_s: Wall time of one tool call; past it every process the command
            started is killed (the shell survives) and the call is a ``timeout`` error.
        episode_time_s: Hard wall-time budget of an episode, counted from ``reset``; tool calls
            past it are ``denied`` and a running command is cut at the budget.
        memory_mb: Address space of each process (``RLIMIT_AS``) and, where cgroups can be
            written, the resident memory of the whole sandbox.
        max_processes: Processes and threads alive at once in the sandbox (fork bombs stop here).
        max_file_size_mb: Largest file a command may write (``RLIMIT_FSIZE``).
        max_output_bytes: Output a command may produce; past it the command is stopped and the
            call is an ``execution_error`` with the output cut.
        max_output_chars: Output shown to the agent; longer output is cut with a visible marker
            (head and tail are kept).
        tmp_size_mb: Size of the private ``/tmp``.
        workspace_mb: Total size of what a runtime's episodes (the current one and the
            prestarted next one) and a grading run may write to the workspace. As root the
            overlay's changes live on a tmpfs of this size, so a sandbox cannot fill the host's
            disk; unprivileged, only ``max_file_size_mb`` bounds each file.
        max_command_bytes: Largest ``bash`` command (UTF-8 bytes); a longer one is refused with
            ``invalid_arguments`` before anything runs. At most 120,000 (the kernel's limit on
            one argument is 128 KiB).
        max_file_bytes: Largest file ``read_file``/``str_replace`` read and largest content
            ``write_file`` writes; past it the call is refused (``invalid_arguments`` for
            content, ``execution_error`` for a file too large to read).
        artifact_max_bytes: Total size of the files an episode's artifact holds, counted at
            their apparent size (a sparse file counts in full).
        artifact_max_files: Number of changed files an artifact holds.
        artifact_max_path_bytes: Longest path (bytes, relative to the workspace) of a changed
            file.
        cpus: A CPU quota for the whole sandbox, in CPUs (``1.5``: one and a half cores);
            ``None`` (the default) leaves it uncapped. Either way, where cgroups can be written,
            each sandbox is a CPU group of its own, so the scheduler shares CPU between
            sandboxes, not between their processes.
        artifact_max_depth: Deepest directory nesting of the workspace's changes (it bounds
            the snapshot's walk). An episode over any artifact limit yields an artifact with no files and
            ``meta["limit_exceeded"]`` saying which limit (graders score it 0).
    """

    command_timeout_s: float = 30.0
    episode_time_s: float = 900.0
    memory_mb: int = 1024
    max_processes: int = 128
    max_file_size_mb: int = 64
    max_output_bytes: int = 1 << 20
    max_output_chars: int = 16_384
    tmp_size_mb: int = 256
    workspace_mb: int = 1024
    max_command_bytes: int = 64 * 1024
    max_file_bytes: int = 4 << 20
    artifact_max_bytes: int = 32 << 20
    artifact_max_files: int = 10_000
    artifact_max_path_bytes: int = 1024
    artifact_max_depth: int = 64
    cpus: float | None = None

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if name == "cpus" and value is None:
                continue
            if value <= 0:
                raise ConfigError(f"SandboxLimits.{name} must be positive, got {value!r}")
        if self.max_output_chars < 64:
            raise ConfigError("max_output_chars must be at least 64 to fit the cut marker")
        if self.max_command_bytes > 120_000:
            raise ConfigError("max_command_bytes must be at most 120000 (the kernel's limit on one "
                              "argument is 128 KiB)")
        if self.max_processes < 8:
            raise ConfigError("max_processes must be at least 8 (the shell itself needs a few)")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
