"""``SandboxRuntime``: tool calls in a bubblewrap sandbox over a copy-on-write workspace."""

from __future__ import annotations

import itertools
import logging
import signal
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from proofgym.runtimes.artifact import Artifact
from proofgym.runtimes.grading_lease import HiddenLease, episode_lease
from proofgym.runtimes.sandbox.box import Overlay, SandboxHome
from proofgym.runtimes.sandbox.bwrap import WORKSPACE
from proofgym.runtimes.sandbox.changes import read_changes
from proofgym.runtimes.sandbox.limits import SandboxLimits
from proofgym.runtimes.sandbox.shell import CommandOutcome, SandboxShell, supervisor_command
from proofgym.runtimes.sandbox.snapshot_source import SnapshotSource, materialize
from proofgym.runtimes.sandbox.system import PYTEST_PACKAGES, SandboxSetupError, SandboxSystem
from proofgym.tools import Tool, ToolError, ToolRegistry, ToolResult, cut_output

log = logging.getLogger(__name__)
#: ``use_snapshot``'s default: the system stays as it is.
_KEEP = object()


class SandboxRuntime:
    """Runs ``bash`` and file tools in a bubblewrap sandbox, one sandbox per episode.

    The sandbox sees a read-only minimal system (``/usr``, Python with only ``packages`` in its
    ``site-packages``), a private ``/tmp``, no network, and ``/workspace``: a copy-on-write
    overlay over the read-only task snapshot set with :meth:`use_snapshot`. Only the workspace
    and ``/tmp`` are writable. The sandbox's pid 1 is a trusted supervisor (see
    :mod:`~proofgym.runtimes.sandbox.shell`): each ``bash`` call is a fresh shell whose status
    and output it reports, the file tools are done by it, and no process of the agent outlives
    a call.

    Invariants:
        * ``reset()`` costs the same for 10 or 10,000 snapshot files (it never copies the
          snapshot) and leaves nothing of the previous episode: fresh overlay, fresh shell,
          fresh ``/tmp``.
        * ``execute`` never raises for agent input: limits and failures come back as typed
          :class:`ToolResult` errors (``timeout``, ``execution_error``, ``denied``,
          ``invalid_arguments``).
        * ``snapshot()`` holds exactly the files the agent wrote, created or deleted, read with
          every process of the episode stopped and without following links; over the artifact
          limits it holds no files and ``meta["limit_exceeded"]`` says why.
        * Construction fails with :class:`SandboxSetupError` when bwrap (or a kernel feature)
          is missing; there is no unisolated fallback.

    Args:
        snapshot: The read-only task tree to start from (default: an empty workspace): a
            directory, a ``.tar``/``.tar.gz``/``.zip`` archive (path or bytes), or a mapping of
            workspace-relative paths to contents (see
            :func:`~proofgym.runtimes.sandbox.snapshot_source.materialize`).
        limits: Per-command and per-episode limits.
        packages: Python packages bound into the sandbox's ``site-packages`` (of the default
            minimal system; ignored with ``image``).
        image: An environment image (:mod:`~proofgym.runtimes.sandbox.images`, built here if it
            is not yet) to run on instead; its ``describe()`` goes into :meth:`config` (so the
            rollout contract), its digest into every snapshot's ``meta["image"]``.
        scratch_dir: Where overlay upper directories live (default: the system temp dir).
        prestart: Boot the next episode's sandbox in the background (see :meth:`reset`).
        tools: The agent's tools. ``None``: the defaults (:data:`DEFAULT_TOOLS`). Otherwise a
            sequence whose items are default tool names (``"bash"``, ``"read_file"``, ...) or
            :class:`~proofgym.tools.Tool` objects (``@tool`` functions); a tool function with a
            parameter typed :class:`~proofgym.runtimes.sandbox.tools.Sandbox` receives this
            runtime's handle (``run_bash``, ``read_file``, ``write_file``). See
            :func:`~proofgym.runtimes.sandbox.tools.select_tools`.
    """

    kind = "sandbox"

    def __init__(self, snapshot: SnapshotSource | None = None, *, limits: SandboxLimits | None = None,
                 packages: Sequence[str] = PYTEST_PACKAGES, scratch_dir: str | Path | None = None,
                 prestart: bool = True, tools: Sequence[str | Tool] | None = None,
                 image: SandboxSystem | None = None) -> None:
        from proofgym.runtimes.sandbox.tools import select_tools

        self.limits = limits or SandboxLimits()
        self.sandbox, chosen = select_tools(self, tools)  # bad tools fail before any setup
        self.tools = ToolRegistry(chosen)
        self._home = SandboxHome(self.limits, packages=packages, prefix="proofgym-sandbox-",
                                 parent=scratch_dir, image=image)
        self.bwrap, self.system = self._home.bwrap, self._home.system
        self._root, self._cgroup = self._home.root, self._home.cgroup
        self._empty = self._root / "empty"
        self._empty.mkdir()
        self._lower = self._empty
        self._episodes = itertools.count()
        self._overlay: Overlay | None = None
        self._shell: SandboxShell | None = None
        self._closed = False
        self.prestart = prestart
        self._background = ThreadPoolExecutor(1, thread_name_prefix="proofgym-sandbox")
        self._spare: tuple[Overlay, Future[SandboxShell], SandboxSystem] | None = None
        self._pending: Future[SandboxShell] | None = None
        self._dirty = False
        # a snapshot taken from another thread waits for the running call (which ends with
        # every process of the call killed) instead of reading a workspace still being written
        self._lock = threading.RLock()
        self._retiring: Future[None] | None = None
        # the episode's lease on its task's hidden key (see hold_hidden_key)
        self._hidden_key: str | None = None
        self._lease: HiddenLease | None = None
        self.reset()
        if snapshot is not None:
            self.use_snapshot(snapshot)

    # ------------------------------------------------------------- lifecycle
    def use_snapshot(self, source: SnapshotSource, *, image: Any = _KEEP) -> None:
        """Base the workspace on the read-only tree ``source`` (a directory, an archive or a
        mapping of paths to contents, see :func:`materialize`) and start a fresh episode on it
        (a no-op when the episode is already a fresh one on that tree). ``image``: also switch
        to that system first (see :meth:`use_image`), in the same one reset."""
        path = materialize(source)
        if not path.is_dir():
            raise SandboxSetupError(f"sandbox snapshot {path} is not a directory")
        changed = image is not _KEEP and self._home.use(image)
        self.system = self._home.system
        if path == self._lower and not self._dirty and not changed:
            return
        self._lower = path
        self.reset()

    def use_image(self, image: SandboxSystem | None) -> None:
        """Run the next episodes on ``image`` (built if it is not yet; ``None``: the default
        minimal system) and start a fresh episode on it (a no-op when it is the current one):
        a task that brings its own image sets it in its ``setup_runtime``."""
        changed = self._home.use(image)
        self.system = self._home.system
        if changed:
            self.reset()

    def reset(self) -> None:
        """A fresh episode: a new overlay over the snapshot and a new shell.

        With ``prestart`` a spare sandbox over the same snapshot is booted in the background
        after every reset, so the next reset only swaps it in. The old sandbox is killed and its
        changes deleted in the background (with or without ``prestart``); the new episode's first
        tool call waits until they are gone. Without a matching spare, the shell starts on
        first use.
        """
        if self._closed:
            raise SandboxSetupError("this SandboxRuntime is closed")
        old_shell, old_overlay = self._shell, self._overlay
        old_pending = self._pending if old_shell is None else None  # booted but never used
        old_lease, self._lease, self._hidden_key = self._lease, None, None
        self._shell = self._pending = None
        spare, self._spare = self._spare, None
        if spare is not None and spare[0].lower == self._lower and spare[2] is self.system:
            self._overlay, self._pending, _ = spare
        else:
            if spare is not None:
                self._retire(spare[1], spare[0])
            self._overlay = self._home.overlay(self._lower, f"ep{next(self._episodes)}")
            self._pending = None
        self._episode_deadline = time.monotonic() + self.limits.episode_time_s
        self._shell_restarts = 0
        self._dirty = False
        if self.prestart:
            overlay = self._home.overlay(self._lower, f"ep{next(self._episodes)}")
            self._spare = (overlay, self._background.submit(self._boot, overlay, self.system),
                           self.system)
        # after the spare's boot in the queue: the next reset waits on the spare, not on this;
        # the new episode's first call waits for it (see _settle())
        self._retiring = self._retire(old_shell or old_pending, old_overlay, old_lease)

    def _retire(self, shell: SandboxShell | Future[SandboxShell] | None,
                overlay: Overlay | None, lease: HiddenLease | None = None) -> Future[None] | None:
        """Kill a sandbox (running, or still booting) and delete its changes, off the caller's
        path (the returned future, when it runs in the background); its episode's lease goes
        once no process of it is left."""
        def job() -> None:
            try:
                sh = self._pending_shell(shell) if isinstance(shell, Future) else shell
                if sh is not None:
                    sh.kill()
            finally:
                if lease is not None:
                    lease.release()
            if overlay is not None:
                SandboxHome.discard(overlay)
        if shell is None and overlay is None:
            if lease is not None:
                lease.release()
            return None
        if self._closed:
            job()
            return None
        # also without prestart: the new sandbox boots while the old one's pid namespace is
        # torn down (milliseconds of waiting); the new episode's first call waits for it
        return self._background.submit(job)

    @staticmethod
    def _pending_shell(future: Future[SandboxShell] | None) -> SandboxShell | None:
        if future is None:
            return None
        try:
            return future.result()
        except Exception:  # a spare that failed to boot has nothing left to kill
            return None

    def _boot(self, overlay: Overlay, system: SandboxSystem | None = None) -> SandboxShell:
        system = system or self.system
        foreign = not system.host_python
        spawned = self._home.boot(overlay, supervisor_command(system.python, source=foreign),
                                  as_pid_1=True, system=system)
        shell = SandboxShell(spawned.proc, self._cgroup, self.limits.max_output_bytes,
                             max_frame_bytes=self.limits.max_file_bytes + (1 << 16),
                             pidns=spawned.pidns, source=foreign)
        try:
            shell.wait_ready()
        finally:
            spawned.detach_mount()  # the sandbox has its own copy from here on
        return shell

    def hold_hidden_key(self, key: str | None) -> None:
        """This episode's task has hidden material with this key
        (:func:`~proofgym.runtimes.grading_lease.hidden_key_of`; ``None``: none): take an episode
        lease on it now (waiting while a grading of the key runs or waits anywhere on this host)
        and hold it until every process of the episode's sandbox is gone (:meth:`snapshot`, the
        next :meth:`reset`, :meth:`close`). A tool call after :meth:`snapshot` takes it again
        before it runs. The env calls this after the task's ``setup_runtime``."""
        with self._lock:
            if key == self._hidden_key and (key is None or self._lease is not None):
                return
            old, self._lease, self._hidden_key = self._lease, None, key
            if key is not None:
                self._lease = episode_lease(key)
        if old is not None:  # another key's material: (a task set up twice in one episode)
            self._freeze()
            old.release()

    def _hold_lease(self) -> None:
        """Before any process of the agent runs (lock held)."""
        if self._hidden_key is not None and self._lease is None:
            self._lease = episode_lease(self._hidden_key)

    def _drop_lease(self) -> None:
        """Once no process of the agent is left (lock held)."""
        lease, self._lease = self._lease, None
        if lease is not None:
            lease.release()

    def start(self) -> None:
        """Have the episode's sandbox and shell running (the first tool call does this)."""
        self._hold_lease()  # also after snapshot(), whose shell lives on without the agent's
        if self._shell is not None and self._shell.alive:
            return
        assert self._overlay is not None
        pending, self._pending = self._pending, None
        shell = self._pending_shell(pending)
        if shell is None or not shell.alive:
            shell = self._boot(self._overlay)
        self._shell = shell

    def _stop(self) -> None:
        if self._shell is not None:
            self._shell.kill()
            self._shell = None

    def __reduce__(self) -> Any:
        # refused by name: pickle's own error names a local tool function, not the cause
        raise TypeError(
            "a sandboxed env (SandboxRuntime) does not pickle or copy: it owns a live sandbox "
            "(processes and mounts on this machine). Build the env in each process instead "
            "(make_env(ENV_ID)); for TRL pass environment_factory(ENV_ID), whose instances pickle "
            "as fresh ones; a grading job (env.verification_job(...)) pickles")

    def close(self) -> None:
        if self._closed:
            return
        self._background.shutdown(wait=True)
        self._closed = True
        self._stop()
        self._drop_lease()
        if self._spare is not None:
            self._retire(self._spare[1], self._spare[0])
        self._retire(self._pending, None)
        self._home.close(settle_s=0.5)

    def __enter__(self) -> SandboxRuntime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            self.close()

    # --------------------------------------------------------------- execute
    def execute(self, tool_name: str, tool_input: Any) -> ToolResult:
        prepared = self.tools.prepare(tool_name, tool_input)
        if isinstance(prepared, ToolResult):
            return prepared
        t, kwargs = prepared
        if time.monotonic() >= self._episode_deadline:
            return ToolResult.error("denied", f"the episode's time budget "
                                    f"({self.limits.episode_time_s:g} s) is spent; no more tool calls")
        try:
            result = t.invoke(kwargs, resources=(self.sandbox,))
        except SandboxSetupError as exc:  # the host, not the agent: report it, keep going
            log.error("sandbox failure during %s: %s", tool_name, exc)
            return ToolResult.error("execution_error", f"the sandbox failed: {exc}")
        text, was_cut = cut_output(result.output, self.limits.max_output_chars)
        return ToolResult(text, result.error_kind, was_cut or result.truncated)

    def _run(self, command: str, timeout_s: float) -> CommandOutcome:
        with self._lock:
            return self._run_locked(command, timeout_s)

    def _settle(self) -> None:
        """The previous episode's processes and files share this runtime's memory cgroup: they
        are gone before this episode's first tool call runs (the agent's first turn hides it)."""
        retiring, self._retiring = self._retiring, None
        if retiring is not None:
            retiring.result()

    def _run_locked(self, command: str, timeout_s: float) -> CommandOutcome:
        self._dirty = True
        self._settle()
        self.start()
        assert self._shell is not None
        # the command's own limit counts once its shell is ready: booting the sandbox (a cold
        # reset, a restart after a lost shell) is the host's time, not the agent's (the
        # episode's deadline is a point in time, and the boot does count against it)
        left = min(timeout_s, self._episode_deadline - time.monotonic())
        outcome = self._shell.run(command, max(0.0, left))
        if outcome.shell_lost:
            self._stop()  # the next call starts a new sandbox over the same files
            self._shell_restarts += 1
        return outcome

    def run_bash(self, command: str) -> str:
        """The ``bash`` tool: output (plus ``[exit code N]``), or a typed :class:`ToolError`."""
        lim = self.limits
        size = len(command.encode("utf-8", "surrogateescape"))
        if size > lim.max_command_bytes:
            raise ToolError(f"the command has {size} bytes, more than the limit of "
                            f"{lim.max_command_bytes}; write long scripts to a file with write_file "
                            "and run the file", "invalid_arguments")
        out = self._run(command, lim.command_timeout_s)
        text = out.output.decode("utf-8", errors="replace")
        notes = [f"[{out.note}]"] if out.note else []
        if out.shell_lost:
            notes.append("[the sandbox stopped answering and was restarted: files are kept, the "
                         "working directory and variables are reset]")
            if not out.timed_out:
                raise ToolError(_join(text, *notes), "execution_error")
        if out.timed_out and out.shell_lost and out.out_of_memory:
            raise ToolError(_join(text, f"[the sandbox ran out of memory (the limit is {lim.memory_mb} "
                                  "MiB, files included) and stopped answering]", *notes,
                                  "[files count against the memory limit: if commands are killed "
                                  "before they run, empty large files with write_file (content \"\")]"),
                            "execution_error")
        if out.timed_out and out.process_limit and not out.shell_lost:
            # a fork bomb: its processes crowd out the command until the clock runs out (on a
            # loaded host first), but the cause to report is the process limit it hit
            raise ToolError(_join(text, f"[the command hit the process limit ({lim.max_processes} "
                                  "processes) and then its time limit; its processes were "
                                  "stopped]", *notes), "execution_error")
        if out.timed_out:
            budget_hit = time.monotonic() >= self._episode_deadline
            why = (f"the episode's time budget ({lim.episode_time_s:g} s)" if budget_hit
                   else f"the time limit of {lim.command_timeout_s:g} s")
            raise ToolError(_join(text, f"[command killed: it exceeded {why}; every process it "
                                  "started was stopped]", *notes), "timeout")
        if out.output_exceeded:
            raise ToolError(_join(text, f"[command killed: its output exceeded {lim.max_output_bytes}"
                                  " bytes; redirect it to a file and read parts of it]", *notes),
                            "execution_error")
        if out.out_of_memory:
            notes += self._free_tmp()
            raise ToolError(_join(text, f"[the command ran out of memory: the limit is "
                                  f"{lim.memory_mb} MiB]", *notes), "execution_error")
        if out.process_limit:
            raise ToolError(_join(text, f"[the command hit the process limit ({lim.max_processes} "
                                  "processes); its processes were stopped]", *notes),
                            "execution_error")
        if out.stragglers:
            raise ToolError(_join(text, f"[the command left {out.stragglers} process(es) running "
                                  "when it returned; they were stopped: a command must not leave "
                                  "processes behind (run servers and waits within one command)]",
                                  *notes), "execution_error")
        if out.exit_code == 128 + signal.SIGXFSZ:
            raise ToolError(_join(text, f"[the command tried to write a file larger than the limit "
                                  f"of {lim.max_file_size_mb} MiB]", *notes), "execution_error")
        if out.exit_code not in (None, 0):
            notes.insert(0, f"[exit code {out.exit_code}]")
        return _join(text, *notes)

    def _free_tmp(self) -> list[str]:
        """After an out-of-memory kill: files in ``/tmp`` are memory charged to the sandbox that
        no process holds, so when they fill it every later shell would be killed before it ran.
        Then the sandbox is restarted (an empty ``/tmp``; the workspace is kept)."""
        with self._lock:
            if self._shell is None or not self._shell.alive:
                return []
            reply = self._shell.call({"op": "tmp_usage"}, 5.0)
            used = (reply or {}).get("used", 0)
            if reply is not None and used < (self.limits.memory_mb << 20) // 2:
                return ["[files count against the memory limit too: if commands are killed "
                        "before they run, empty large files with write_file (content \"\")]"]
            self._stop()
            self._shell_restarts += 1
        return [f"[files in /tmp held {used >> 20} MiB, which counts against the memory limit: the "
                "sandbox was restarted with an empty /tmp; files in /workspace are kept, the "
                "working directory and variables are reset]"]

    def file_request(self, request: dict[str, Any]) -> dict[str, Any]:
        """A file tool's request to the sandbox's supervisor (which resolves paths inside the
        workspace without following symlinks); a failure to answer is a :class:`ToolError`."""
        with self._lock:
            return self._file_request_locked(request)

    def _file_request_locked(self, request: dict[str, Any]) -> dict[str, Any]:
        self._dirty = True
        self._settle()
        self.start()
        assert self._shell is not None
        reply = self._shell.call(request, self.limits.command_timeout_s)
        if reply is None:
            self._stop()
            self._shell_restarts += 1
            raise ToolError("the sandbox stopped answering and was restarted; files are kept, "
                            "try again", "execution_error")
        return reply

    # -------------------------------------------------------------- snapshot
    def snapshot(self) -> Artifact:
        """The episode's changes: files written or created (content) or deleted (``None``).

        Every process of the episode is stopped first, and the changes are read through
        directory descriptors without following symlinks (see :func:`read_changes`). Over the
        artifact limits of :class:`SandboxLimits`, the artifact holds no files and
        ``meta["limit_exceeded"]`` says which limit (graders score it 0).
        """
        assert self._overlay is not None
        with self._lock:
            self._freeze()
            self._drop_lease()  # the episode's processes are gone: a grading of its key may run
            changes = read_changes(self._overlay.upper, self._overlay.lower, self.limits)
        meta: dict[str, Any] = {"snapshot": str(self._lower), "skipped": changes.skipped,
                                "shell_restarts": self._shell_restarts}
        if changes.limit_exceeded is not None:
            meta["limit_exceeded"] = changes.limit_exceeded
        if self._home.image is not None:
            meta["image"] = self._home.image.digest
        return Artifact(self.kind, files=changes.files, meta=meta)

    def _freeze(self) -> None:
        """No process of the episode runs once this returns: the supervisor kills and reaps
        them; if it cannot, the whole sandbox is killed and waited for."""
        if self._shell is None or not self._shell.alive:
            return
        if not self._shell.quiesce():
            self._stop()  # waits until none of the sandbox's processes is left

    @property
    def workspace_changes_dir(self) -> Path:
        """The host directory holding this episode's raw overlay changes (for diagnostics)."""
        assert self._overlay is not None
        return self._overlay.upper

    def config(self) -> dict[str, Any]:
        config = {"kind": self.kind, "limits": self.limits.to_dict(),
                  "packages": list(getattr(self.system, "packages", ())),
                  "workspace": WORKSPACE, "network": False, "cgroup": self._cgroup is not None,
                  "tools": self.tools.schemas()}
        if self._home.image is not None:  # the default's config (and contract id) stays as it was
            config["image"] = self._home.image.describe()
        return config


def _join(*parts: str) -> str:
    return "\n".join(p.rstrip("\n") for p in parts if p)

