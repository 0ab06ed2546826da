"""The one way a sandbox boots and is torn down: :class:`SandboxHome` and :meth:`SandboxHome.boot`.

Agent episodes (:class:`~proofgym.runtimes.sandbox.runtime.SandboxRuntime`), gradings
(:mod:`proofgym.verify.sandboxed.workspace`) and the benches all start their sandboxes here, so a
hardening of the boot (ids, cgroups, rlimits, the seccomp filter, the bwrap arguments) lands in
every sandbox at once.

A *home* is the host side a sandbox needs besides its process: scratch space for overlay upper
directories (a size-capped tmpfs as root) and a cgroup (processes, memory, CPU). A runtime keeps
one home for all its episodes (they share its memory budget, one after the other); a grading has
a home of its own. :meth:`SandboxHome.boot` starts ``bwrap`` over an overlay in the home, as a
uid of its own (:mod:`~proofgym.runtimes.sandbox.ids`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path

from proofgym.runtimes.sandbox import cgroups, seccomp
from proofgym.runtimes.sandbox.bwrap import (
    Overlay,
    Spawned,
    bwrap_argv,
    find_bwrap,
    remove_scratch,
    remove_tree,
    scratch_dir,
    spawn,
)
from proofgym.runtimes.sandbox.limits import SandboxLimits
from proofgym.runtimes.sandbox.namespaces import remove_at_exit, removed
from proofgym.runtimes.sandbox.system import (
    PYTEST_PACKAGES,
    MinimalSystem,
    SandboxSetupError,
    SandboxSystem,
)

__all__ = ["Overlay", "SandboxHome", "Spawned", "ready_system"]

_NO_CGROUP_AS_ROOT = (
    "running as root, a sandbox needs a writable cgroup hierarchy (v1 pids and memory "
    "controllers, or v2 with both enabled) to cap processes and memory: RLIMIT_NPROC does not "
    "bind processes that are root on the host, so nothing would stop a fork bomb. Run as an "
    "ordinary user (rlimits then apply) or make /sys/fs/cgroup writable")


class SandboxHome:
    """Scratch space and a cgroup for sandboxes with ``limits`` over ``image`` (an environment
    image, built here if it is not yet) or, by default, the minimal system with ``packages``.
    Raises :class:`SandboxSetupError` (saying what to install or change) when the host cannot
    run them: no bwrap, no libseccomp, as root no writable cgroups."""

    def __init__(self, limits: SandboxLimits, *, packages: Sequence[str] = PYTEST_PACKAGES,
                 prefix: str = "proofgym-sandbox-", parent: str | Path | None = None,
                 image: SandboxSystem | None = None) -> None:
        self.limits = limits
        self.bwrap = find_bwrap()
        # built once per process: without libseccomp this fails here, at setup
        seccomp.filter_program()
        self.packages = tuple(packages)
        #: the environment image sandboxes boot on (``None``: the default minimal system)
        self.image: SandboxSystem | None = ready_system(image) if image is not None else None
        self.system: SandboxSystem = self.image or MinimalSystem.default(self.packages)
        self.root = scratch_dir(prefix=prefix, size_mb=limits.workspace_mb, parent=parent)
        self.cgroup = cgroups.create(limits.memory_mb << 20, limits.max_processes, limits.cpus)
        if self.cgroup is None and os.geteuid() == 0:
            remove_scratch(self.root)
            raise SandboxSetupError(_NO_CGROUP_AS_ROOT)
        # if this process goes without close() (an exit that skips finalizers, os._exit,
        # SIGKILL), its spawner kills the sandboxes and removes these (see spawner.py)
        try:
            remove_at_exit(self.root)
            for d in self.cgroup.dirs if self.cgroup is not None else ():
                remove_at_exit(d, "cgroup")
        except BaseException:
            if self.cgroup is not None:
                self.cgroup.remove()
            remove_scratch(self.root)
            raise
        self.closed = False

    def use(self, image: SandboxSystem | None) -> bool:
        """Boot the next sandboxes on ``image`` (built if it is not yet; ``None``: the minimal
        system with this home's packages). Whether that changed the system."""
        system = ready_system(image) if image is not None else MinimalSystem.default(self.packages)
        if system.digest == self.system.digest and (image is None) == (self.image is None):
            return False
        self.system, self.image = system, (system if image is not None else None)
        return True

    def overlay(self, lower: Path, name: str) -> Overlay:
        """A new copy-on-write workspace over ``lower`` in this home (``name`` is its folder)."""
        return Overlay.create(lower, self.root / name)

    def boot(self, overlay: Overlay | None, command: Sequence[str], *, as_pid_1: bool = False,
             pass_fds: Sequence[int] = (), stdin: int | None = None, stdout: int | None = None,
             stderr: int | None = None, system: SandboxSystem | None = None,
             count_own_cpu: bool = False) -> Spawned:
        """Start ``command`` in a sandbox over ``overlay`` (``None``: an empty workspace), in this
        home's cgroup, on ``system`` (default: the home's). ``stdin``/``stdout``/``stderr`` as
        for :class:`subprocess.Popen` (default: pipes, stderr into stdout); ``count_own_cpu``
        as for :func:`~proofgym.runtimes.sandbox.seccomp.filter_program`."""
        import subprocess

        argv = bwrap_argv(self.bwrap, system or self.system, self.limits, command,
                          workspace=overlay.merged if overlay is not None else None,
                          as_pid_1=as_pid_1)
        return spawn(argv, overlay=overlay, limits=self.limits, cgroup=self.cgroup,
                     pass_fds=pass_fds,
                     stdin=subprocess.PIPE if stdin is None else stdin,
                     stdout=subprocess.PIPE if stdout is None else stdout,
                     stderr=subprocess.STDOUT if stderr is None else stderr,
                     count_own_cpu=count_own_cpu)

    @staticmethod
    def discard(overlay: Overlay) -> None:
        """Delete an overlay's files (its sandbox must be gone)."""
        remove_tree(overlay.upper.parent)

    def close(self, *, settle_s: float = 2.0) -> None:
        """Remove the cgroup (once its last processes are gone: a pid namespace's processes exit
        just after its init, waited for up to ``settle_s``) and the scratch space."""
        if self.closed:
            return
        self.closed = True
        if self.cgroup is not None:
            self.cgroup.release()
            deadline = time.monotonic() + settle_s
            while self.cgroup.pids() and time.monotonic() < deadline:
                self.cgroup.kill()  # the home's sandboxes are stopped: whatever is left goes
                time.sleep(0.005)
            self.cgroup.remove()
            for d in self.cgroup.dirs:
                if not d.exists():
                    removed(d)
        remove_scratch(self.root)
        removed(self.root)


#: Images made ready in this process, by value (an unbuilt image equals its built self).
_READY: dict[SandboxSystem, SandboxSystem] = {}


def ready_system(image: SandboxSystem) -> SandboxSystem:
    """``image`` ready to boot: an environment image is built (once per cache, and looked up
    once per process) if it is not."""
    if not isinstance(image, SandboxSystem):
        raise SandboxSetupError(f"image must be a SandboxSystem (PackagesImage, OciImage or "
                                f"MinimalSystem); got {type(image).__name__}")
    build = getattr(image, "build", None)
    if not callable(build):
        return image
    if image not in _READY:
        built = build()
        check = getattr(built, "check", None)
        if callable(check):  # a missing interpreter named here, not as a failed boot
            check()
        _READY[image] = built
    return _READY[image]
