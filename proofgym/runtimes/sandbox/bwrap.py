"""Starting a bubblewrap sandbox over a copy-on-write workspace.

bubblewrap 0.8 (Debian 12) has no ``--overlay``, so the overlay is mounted *around* it and
``bwrap`` binds the merged directory as ``/workspace``. As root the overlay is mounted (private)
in our own namespace just for the start of ``bwrap`` and detached as soon as the sandbox holds its
own copy; as an ordinary user, the child enters a user and mount namespace between ``fork`` and
``exec`` and mounts it there. Either way the upper directory is an ordinary host directory that
holds exactly the sandbox's changes.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import resource
import select
import shutil
import subprocess
import tempfile
import time
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
_MNT_DETACH = 2
_MS_BIND = 4096
_MS_NOSUID = 2
_MS_NODEV = 4
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
    view: Path  # where ``lower`` is bound while mounting, so no host path shows in mountinfo

    @classmethod
    def create(cls, lower: Path, root: Path) -> Overlay:
        for p in (lower, root):
            if any(c in str(p) for c in ",:\\\n"):
                raise SandboxSetupError(f"path {p} contains ',', ':' or '\\', which overlayfs "
                                        "cannot take in its options; move it")
        dirs = [root / n for n in ("upper", "work", "merged", "lower")]
        for d in dirs:
            d.mkdir(parents=True)
        return cls(lower, *dirs)

    def options(self, userxattr: bool, *, via_view: bool = False) -> bytes:
        lower = self.view if via_view else self.lower
        opts = f"lowerdir={lower},upperdir={self.upper},workdir={self.work}"
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
    rlimits = _rlimits(limits)
    for path in cgroup_procs:
        fd = os.open(path, os.O_WRONLY)
        os.write(fd, b"0")
        os.close(fd)
    for res, value in rlimits:
        resource.setrlimit(res, (value, value))


def bwrap_argv(bwrap: str, system: MinimalSystem, limits: SandboxLimits, command: Sequence[str], *,
               workspace: Path | None, extra_ro: Sequence[tuple[str, str]] = (),
               as_pid_1: bool = False) -> list[str]:
    """The ``bwrap`` command line: fresh namespaces (no network), the minimal read-only system,
    a private ``/tmp``, and ``workspace`` (the merged overlay) as the only writable host tree.
    With ``as_pid_1`` the command itself is the pid namespace's init (the trusted supervisor)."""
    argv = [bwrap, "--unshare-user", "--uid", "1000", "--gid", "1000", "--disable-userns",
            "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
            "--unshare-cgroup-try", "--hostname", "sandbox", "--die-with-parent", "--new-session",
            "--cap-drop", "ALL", "--clearenv"]
    if as_pid_1:
        argv.append("--as-pid-1")
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


def scratch_dir(prefix: str, size_mb: int, parent: str | Path | None = None) -> Path:
    """A private directory for overlay upper directories. As root it is a tmpfs of ``size_mb``
    (mounted privately in our namespace), so what a sandbox writes cannot fill the host's disk;
    otherwise an ordinary temp directory. Remove it with :func:`remove_scratch`."""
    root = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    if os.geteuid() == 0:
        target = str(root).encode()
        _check(_libc.mount(b"tmpfs", target, b"tmpfs", _MS_NOSUID | _MS_NODEV,
                           f"size={size_mb}m,mode=0700".encode()), f"mounting a tmpfs at {root}")
        _check(_libc.mount(None, target, None, _MS_PRIVATE, None), "making the tmpfs private")
    return root


def remove_scratch(root: Path) -> None:
    """Unmount (if mounted) and delete a :func:`scratch_dir`."""
    if os.path.ismount(root):
        _libc.umount2(str(root).encode(), _MNT_DETACH)
    shutil.rmtree(root, ignore_errors=True)


@dataclass
class Spawned:
    """A started sandbox: its outer ``bwrap`` process and what is known about its namespaces."""

    proc: subprocess.Popen[bytes]
    pidns: str | None = None  # "pid:[INODE]" of the sandbox's pid namespace, when known
    host_mount: Path | None = None  # the overlay's mount point in our namespace, until detached

    def detach_mount(self) -> None:
        """Drop our namespace's copy of the overlay mount (the sandbox keeps its own)."""
        if self.host_mount is not None:
            _libc.umount2(str(self.host_mount).encode(), _MNT_DETACH)
            self.host_mount = None


def spawn(argv: Sequence[str], *, overlay: Overlay | None, limits: SandboxLimits,
          cgroup: SandboxCgroup | None, pass_fds: Sequence[int] = (),
          stdin: int | None = subprocess.PIPE, stdout: int | None = subprocess.PIPE,
          stderr: int | None = subprocess.STDOUT) -> Spawned:
    """Start ``argv`` (a :func:`bwrap_argv`) over ``overlay``, inside ``cgroup``, with the rlimits.

    As root: the overlay is mounted in our own mount namespace (private, so nothing propagates)
    and ``bwrap`` is started with ``vfork`` (no copy of this process's memory), held at
    ``--block-fd`` until the sandbox's first process is in the cgroup and has its rlimits, so
    nothing in the sandbox ever runs unconfined. Otherwise: :func:`_enter_namespace` runs
    between fork and exec to do the same inside a user namespace.
    """
    if os.geteuid() != 0:
        return Spawned(_spawn_unprivileged(argv, overlay, limits, cgroup, pass_fds, stdin, stdout, stderr))
    mounted = None
    if overlay is not None:
        target, view = str(overlay.merged).encode(), str(overlay.view).encode()
        # the sandbox can read the overlay's options in /proc/self/mountinfo: show it a scratch
        # path, not where the task lives on the host
        _check(_libc.mount(str(overlay.lower).encode(), view, None, _MS_BIND, None),
               f"binding the snapshot {overlay.lower}")
        try:
            _check(_libc.mount(None, view, None, _MS_PRIVATE, None), "making the snapshot private")
            _check(_libc.mount(b"overlay", target, b"overlay", 0,
                               overlay.options(userxattr=False, via_view=True)),
                   f"mounting the overlay at {overlay.merged}")
        finally:
            _libc.umount2(view, _MNT_DETACH)  # the overlay holds its own reference to the layer
        _check(_libc.mount(None, target, None, _MS_PRIVATE, None), "making the overlay private")
        mounted = overlay.merged
    spawned = Spawned(None, host_mount=mounted)  # type: ignore[arg-type]
    info_r, info_w = os.pipe()
    block_r, block_w = os.pipe()
    try:
        full = [argv[0], "--info-fd", str(info_w), "--block-fd", str(block_r), *argv[1:]]
        try:
            spawned.proc = subprocess.Popen(
                full, stdin=stdin, stdout=stdout, stderr=stderr, close_fds=True,
                pass_fds=(info_w, block_r, *pass_fds), start_new_session=True,
                env={"PATH": os.environ.get("PATH", "")})
        except FileNotFoundError as exc:
            raise SandboxSetupError(INSTALL_HINT) from exc
        os.close(info_w)
        os.close(block_r)
        info_w = block_r = -1
        info = _read_info(info_r)
        if info is None:
            spawned.proc.wait()
            raise SandboxSetupError(f"bwrap failed to start the sandbox (exit {spawned.proc.returncode})"
                                    + _output_of(spawned.proc))
        child = int(info["child-pid"])
        spawned.pidns = f"pid:[{info['pid-namespace']}]"
        for path in cgroup.procs_files() if cgroup else ():
            with open(path, "w") as f:
                f.write(str(child))
        for res, value in _rlimits(limits):
            resource.prlimit(child, res, (value, value))
        os.write(block_w, b"1")
        return spawned
    except BaseException:
        if spawned.proc is not None and spawned.proc.poll() is None:
            os.killpg(spawned.proc.pid, 9)
            spawned.proc.wait()
        spawned.detach_mount()
        raise
    finally:
        for fd in (info_r, info_w, block_r, block_w):
            if fd >= 0:
                os.close(fd)


def _read_info(fd: int, timeout_s: float = 20.0) -> dict | None:
    data = b""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
        try:
            return json.loads(data)
        except ValueError:
            continue
    return None


def _output_of(proc: subprocess.Popen[bytes]) -> str:
    if proc.stdout is None:
        return ""
    try:
        os.set_blocking(proc.stdout.fileno(), False)
        text = (proc.stdout.read() or b"").decode(errors="replace").strip()
    except OSError:
        return ""
    return f": {text}" if text else ""


def _rlimits(limits: SandboxLimits) -> list[tuple[int, int]]:
    return [(resource.RLIMIT_AS, limits.memory_mb << 20),
            (resource.RLIMIT_FSIZE, limits.max_file_size_mb << 20),
            (resource.RLIMIT_NPROC, limits.max_processes),
            (resource.RLIMIT_CORE, 0)]


def _spawn_unprivileged(argv: Sequence[str], overlay: Overlay | None, limits: SandboxLimits,
                        cgroup: SandboxCgroup | None, pass_fds: Sequence[int], stdin: int | None,
                        stdout: int | None, stderr: int | None) -> subprocess.Popen[bytes]:
    procs = tuple(cgroup.procs_files()) if cgroup else ()
    try:
        return subprocess.Popen(
            list(argv), stdin=stdin, stdout=stdout, stderr=stderr, pass_fds=tuple(pass_fds),
            start_new_session=True, close_fds=True, env={"PATH": os.environ.get("PATH", "")},
            preexec_fn=lambda: _enter_namespace(overlay, procs, limits, privileged=False))
    except subprocess.SubprocessError as exc:  # the preexec hook failed: say what and how to fix
        raise SandboxSetupError(
            f"could not prepare the sandbox's user and mount namespace and overlay: {exc}. The "
            "kernel must allow unprivileged user namespaces (sysctl "
            "kernel.unprivileged_userns_clone=1) and overlayfs in them (Linux >= 5.11).") from exc
    except FileNotFoundError as exc:
        raise SandboxSetupError(INSTALL_HINT) from exc
