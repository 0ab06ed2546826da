"""Starting a bubblewrap sandbox over a copy-on-write workspace.

bubblewrap 0.8 (Debian 12) has no ``--overlay``, so the overlay is mounted *around* it: the
child process, between ``fork`` and ``exec``, enters a private mount namespace (as root; as an
ordinary user, a user and mount namespace), mounts ``overlay(lower=snapshot, upper=changes)`` on
an empty directory that only that namespace sees, joins the sandbox's cgroup, lowers its
rlimits, and then execs ``bwrap``, which binds the merged directory as ``/workspace``. The mount
dies with the namespace's last process; nothing is left mounted on the host. The upper
directory is an ordinary host directory that holds exactly the sandbox's changes.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import resource
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from proofgym.runtimes.sandbox.cgroups import SandboxCgroup
from proofgym.runtimes.sandbox.limits import SandboxLimits
from proofgym.runtimes.sandbox.system import SANDBOX_PYLIB, MinimalSystem, SandboxSetupError

WORKSPACE = "/workspace"
INSTALL_HINT = ("bubblewrap (`bwrap`) is required for SandboxRuntime and was not found on PATH. "
                "Install it: `apt-get install -y bubblewrap` (Debian/Ubuntu), `dnf install "
                "bubblewrap` (Fedora) or `pacman -S bubblewrap` (Arch).")

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_MS_REC = 0x4000
_MS_PRIVATE = 1 << 18
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def find_bwrap() -> str:
    """The path of ``bwrap``, or a :class:`SandboxSetupError` saying how to install it."""
    path = shutil.which("bwrap")
    if path is None:
        raise SandboxSetupError(INSTALL_HINT)
    return path


@dataclass(frozen=True)
class Overlay:
    """A copy-on-write workspace: ``lower`` is never written; changes land in ``upper``."""

    lower: Path
    upper: Path
    work: Path
    merged: Path

    @classmethod
    def create(cls, lower: Path, root: Path) -> Overlay:
        for p in (lower, root):
            if any(c in str(p) for c in ",:\\\n"):
                raise SandboxSetupError(f"path {p} contains ',', ':' or '\\', which overlayfs "
                                        "cannot take in its options; move it")
        dirs = [root / n for n in ("upper", "work", "merged")]
        for d in dirs:
            d.mkdir(parents=True)
        return cls(lower, *dirs)

    def options(self, userxattr: bool) -> bytes:
        opts = f"lowerdir={self.lower},upperdir={self.upper},workdir={self.work}"
        return (opts + (",userxattr" if userxattr else "")).encode()


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _enter_namespace(overlay: Overlay | None, cgroup_procs: Sequence[str],
                     limits: SandboxLimits, privileged: bool) -> None:
    """Runs in the child between fork and exec (keep it to system calls)."""
    if privileged:
        _check(_libc.unshare(_CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    else:
        uid, gid = os.getuid(), os.getgid()
        _check(_libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNS), "unshare(CLONE_NEWUSER|CLONE_NEWNS)")
        for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"),
                           ("gid_map", f"0 {gid} 1")):
            fd = os.open(f"/proc/self/{name}", os.O_WRONLY)
            os.write(fd, text.encode())
            os.close(fd)
    _check(_libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "making / private")
    if overlay is not None:
        _check(_libc.mount(b"overlay", str(overlay.merged).encode(), b"overlay", 0,
                           overlay.options(userxattr=not privileged)), "mounting the overlay")
    for path in cgroup_procs:
        fd = os.open(path, os.O_WRONLY)
        os.write(fd, b"0")
        os.close(fd)
    mem = limits.memory_mb << 20
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    fsize = limits.max_file_size_mb << 20
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    resource.setrlimit(resource.RLIMIT_NPROC, (limits.max_processes, limits.max_processes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def bwrap_argv(bwrap: str, system: MinimalSystem, limits: SandboxLimits, command: Sequence[str], *,
               workspace: Path | None, extra_ro: Sequence[tuple[str, str]] = ()) -> list[str]:
    """The ``bwrap`` command line: fresh namespaces (no network), the minimal read-only system,
    a private ``/tmp``, and ``workspace`` (the merged overlay) as the only writable host tree."""
    argv = [bwrap, "--unshare-user", "--uid", "1000", "--gid", "1000", "--disable-userns",
            "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
            "--unshare-cgroup-try", "--hostname", "sandbox", "--die-with-parent", "--new-session",
            "--cap-drop", "ALL", "--clearenv"]
    env = {"PATH": system.path, "HOME": "/tmp", "USER": "agent", "LOGNAME": "agent",
           "LANG": "C.UTF-8", "TERM": "dumb", "LD_LIBRARY_PATH": SANDBOX_PYLIB,
           "PYTHONDONTWRITEBYTECODE": "1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
           "PYTHONUNBUFFERED": "1"}
    for key, value in env.items():
        argv += ["--setenv", key, value]
    argv += system.bwrap_args()
    argv += ["--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev",
             "--size", str(limits.tmp_size_mb << 20), "--tmpfs", "/tmp"]
    for src, dest in extra_ro:
        argv += ["--ro-bind", src, dest]
    if workspace is not None:
        argv += ["--bind", str(workspace), WORKSPACE, "--chdir", WORKSPACE]
    else:
        argv += ["--dir", WORKSPACE, "--chdir", WORKSPACE]
    argv += ["--remount-ro", "/", "--", *command]
    return argv


def spawn(argv: Sequence[str], *, overlay: Overlay | None, limits: SandboxLimits,
          cgroup: SandboxCgroup | None, pass_fds: Sequence[int] = (),
          stdin: int | None = subprocess.PIPE, stdout: int | None = subprocess.PIPE,
          stderr: int | None = subprocess.STDOUT) -> subprocess.Popen[bytes]:
    """Start ``argv`` (a :func:`bwrap_argv`) with the overlay mounted around it."""
    privileged = os.geteuid() == 0
    procs = tuple(cgroup.procs_files()) if cgroup else ()
    try:
        return subprocess.Popen(
            list(argv), stdin=stdin, stdout=stdout, stderr=stderr, pass_fds=tuple(pass_fds),
            start_new_session=True, close_fds=True, env={"PATH": os.environ.get("PATH", "")},
            preexec_fn=lambda: _enter_namespace(overlay, procs, limits, privileged))
    except subprocess.SubprocessError as exc:  # the preexec hook failed: say what and how to fix
        raise SandboxSetupError(
            "could not prepare the sandbox's mount namespace and overlay "
            f"({'as root' if privileged else 'in a user namespace'}): {exc}. The kernel must "
            "allow overlayfs mounts (and, without root, unprivileged user namespaces: "
            "sysctl kernel.unprivileged_userns_clone=1, Linux >= 5.11).") from exc
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            raise SandboxSetupError(INSTALL_HINT) from exc
        raise
