"""Starting a bubblewrap sandbox over a copy-on-write workspace.

bubblewrap 0.8 (Debian 12) has no ``--overlay``, so the overlay is mounted *around* it and
``bwrap`` binds the merged directory as ``/workspace``: in a mount namespace of the sandbox's
own, set up between ``fork`` and ``exec`` by the spawner process
(``proofgym/programs/spawner.py``), so it dies with the sandbox. ``bwrap`` itself
always runs as an unprivileged host user (as root: a uid and gid leased for this sandbox alone,
:mod:`~proofgym.runtimes.sandbox.ids`), under the
seccomp filter of :mod:`~proofgym.runtimes.sandbox.seccomp`.
The upper directory is an ordinary host directory that holds exactly the sandbox's changes.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import select
import shutil
import stat
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from proofgym.runtimes.private_dirs import state_dir
from proofgym.runtimes.sandbox import ids, namespaces, seccomp
from proofgym.runtimes.sandbox.cgroups import SandboxCgroup
from proofgym.runtimes.sandbox.limits import SandboxLimits
from proofgym.runtimes.sandbox.scratch import remove_scratch, remove_tree, scratch_dir, sweep_scratch
from proofgym.runtimes.sandbox.system import (
    SandboxSetupError,
    SandboxSystem,
    mount_root_of,
    system_lowers,
)

__all__ = ["WORKSPACE", "Overlay", "Spawned", "bwrap_argv", "find_bwrap", "remove_scratch",
           "remove_tree", "scratch_dir", "spawn", "sweep_scratch"]

WORKSPACE = "/workspace"
INSTALL_HINT = ("bubblewrap (`bwrap`) is required for SandboxRuntime and was not found on PATH. "
                "Install it: `apt-get install -y bubblewrap` (Debian/Ubuntu), `dnf install "
                "bubblewrap` (Fedora) or `pacman -S bubblewrap` (Arch).")

#: The device nodes bwrap's ``/dev`` binds from the host: as root each sandbox gets nodes of its
#: own instead (same devices, new inodes), so the file locks and inotify watches that live on an
#: inode are the sandbox's alone (``tests/security/test_attack_lock_channel.py``).
OWN_DEVICES = {"null": (1, 3), "zero": (1, 5), "full": (1, 7), "random": (1, 8),
               "urandom": (1, 9), "tty": (5, 0)}

#: Kernel knobs under /proc that stay visible but read-only (as in Docker and bwrap itself): the
#: sandbox's own procfs bound read-only over itself, never the host's (a file lock or inotify
#: watch on an inode two sandboxes reach is a channel between them,
#: ``tests/security/test_attack_shared_inodes.py``; procfs makes new inodes per mount).
PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus")
#: Files under /proc hidden behind an empty read-only file of the sandbox's own (not the host's
#: ``/dev/null``: its inode is every sandbox's, so a watch on it sees the neighbours' opens), and
#: directories behind an empty tmpfs (Docker's masked paths): kernel memory, keys, timers and
#: scheduler internals.
PROC_MASKED_FILES = ("kcore", "keys", "key-users", "timer_list", "sched_debug", "latency_stats",
                     # host-wide counters any sandbox moves and any other reads: a channel
                     # between concurrent sandboxes (open files, inodes, dentries, aio, ptys,
                     # locks, memory and scheduler statistics, interrupts, disks)
                     "sys/fs/file-nr", "sys/fs/inode-nr", "sys/fs/inode-state",
                     "sys/fs/dentry-state", "sys/fs/aio-nr", "sys/kernel/pty/nr", "locks",
                     "vmstat", "zoneinfo", "buddyinfo", "pagetypeinfo", "slabinfo", "interrupts",
                     "softirqs", "schedstat", "diskstats")
PROC_MASKED_DIRS = ("acpi", "scsi", "pressure")



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
    view: Path  # where ``lower`` is attached while mounting (in the sandbox's namespace only)

    @classmethod
    def create(cls, lower: Path, root: Path) -> Overlay:
        """The overlay's directories under the new directory ``root``. As root, :func:`spawn`
        gives the upper directory (the workspace's top) to the uid it leases for the sandbox."""
        dirs = [root / n for n in ("upper", "work", "merged", "lower")]
        for d in dirs:
            d.mkdir(parents=True)
        return cls(lower, *dirs)


def bwrap_argv(bwrap: str, system: SandboxSystem, limits: SandboxLimits, command: Sequence[str], *,
               workspace: Path | None, extra_ro: Sequence[tuple[str, str]] = (),
               as_pid_1: bool = False) -> list[str]:
    """The ``bwrap`` command line: fresh namespaces (no network), the read-only ``system``,
    a private ``/tmp``, and ``workspace`` (the merged overlay) as the only writable host tree.
    With ``as_pid_1`` the command itself is the pid namespace's init (the trusted supervisor)."""
    argv = [bwrap, "--unshare-user", "--uid", "1000", "--gid", "1000", "--disable-userns",
            "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
            "--unshare-cgroup-try", "--hostname", "sandbox", "--die-with-parent", "--new-session",
            "--cap-drop", "ALL", "--clearenv"]
    if as_pid_1:
        argv.append("--as-pid-1")
    env = {"PATH": system.path, "HOME": "/tmp", "USER": "agent", "LOGNAME": "agent",
           "LANG": "C.UTF-8", "TERM": "dumb", **system.env,
           "PYTHONDONTWRITEBYTECODE": "1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
           "PYTHONUNBUFFERED": "1"}
    for key, value in env.items():
        argv += ["--setenv", key, value]
    argv += system.bwrap_args()
    argv += ["--proc", "/proc", *_proc_covers(), "--dev", "/dev", "--remount-ro", "/dev",
             "--size", str(limits.tmp_size_mb << 20), "--tmpfs", "/tmp"]
    for src, dest in extra_ro:
        argv += ["--ro-bind", src, dest]
    if workspace is not None:
        argv += ["--bind", str(workspace), WORKSPACE, "--chdir", WORKSPACE]
    else:
        argv += ["--dir", WORKSPACE, "--chdir", WORKSPACE]
    argv += ["--remount-ro", "/", "--", *command]
    return argv


#: bwrap mounts a bind's source from below the host's root (``/oldroot/SOURCE`` while it sets
#: up); from there ``..`` is its private setup root, where ``newroot`` is the sandbox's tree being
#: built. So this prefix names a path of the sandbox itself, e.g. the procfs bwrap just mounted
#: for it. bwrap first resolves every bind's source on the host (``realpath``), where this path
#: does not exist: only ``--ro-bind-try`` keeps such a source, and :func:`_proc_covers` refuses
#: a host that has it (``/newroot``), whose path bwrap would bind instead.
_IN_SANDBOX = "/../newroot"

#: The source :func:`bwrap_argv` gives a masked /proc file; :func:`spawn` replaces it with an
#: empty file of the sandbox's own (bwrap's ``--ro-bind-data``, which needs a descriptor).
_MASK = "/dev/null"


@cache
def _proc_covers() -> tuple[str, ...]:
    """bwrap arguments that make :data:`PROC_READ_ONLY` read-only and mask the rest (only the
    entries this kernel has: a mount needs its target; looked up once, they do not change)."""
    if os.path.lexists(os.path.normpath(_IN_SANDBOX)):
        raise SandboxSetupError(f"{os.path.normpath(_IN_SANDBOX)} exists on this host: bubblewrap "
                                "would bind it instead of the sandbox's own /proc/sys; remove it")
    args: list[str] = []
    for name in PROC_READ_ONLY:
        if os.path.exists(f"/proc/{name}"):
            args += ["--ro-bind-try", f"{_IN_SANDBOX}/proc/{name}", f"/proc/{name}"]
    for name in PROC_MASKED_FILES:
        if os.path.exists(f"/proc/{name}"):
            args += ["--ro-bind", _MASK, f"/proc/{name}"]
    for name in PROC_MASKED_DIRS:
        if os.path.isdir(f"/proc/{name}"):
            args += ["--size", "4096", "--tmpfs", f"/proc/{name}", "--remount-ro", f"/proc/{name}"]
    return tuple(args)


@dataclass
class Spawned:
    """A started sandbox: its outer ``bwrap`` process and what is known about its namespaces."""

    proc: namespaces.SandboxProcess  # offers what the sandbox code uses of subprocess.Popen
    pidns: str | None = None  # "pid:[INODE]" of the sandbox's pid namespace, when known
    host_mount: Path | None = None  # kept for callers: mounts never enter the host's namespace

    def detach_mount(self) -> None:
        """Nothing to do: the overlay lives in the sandbox's own mount namespace."""
        self.host_mount = None


def spawn(argv: Sequence[str], *, overlay: Overlay | None, limits: SandboxLimits,
          cgroup: SandboxCgroup | None, pass_fds: Sequence[int] = (),
          stdin: int | None = subprocess.PIPE, stdout: int | None = subprocess.PIPE,
          stderr: int | None = subprocess.STDOUT, count_own_cpu: bool = False) -> Spawned:
    """Start ``argv`` (a :func:`bwrap_argv`) over ``overlay``, inside ``cgroup``, with the rlimits
    and the seccomp filter (``count_own_cpu``: see :func:`seccomp.filter_program`), as an
    unprivileged host user.

    The spawner's child (``proofgym/programs/spawner.py``) joins the cgroup and sets
    the rlimits before ``exec``, so nothing in the sandbox ever runs unconfined. ``bwrap`` reads
    its arguments from a pipe (``--args``), so no host path shows in the sandbox's process
    list, and runs with an empty environment, so none shows in ``/proc/1/environ``.
    """
    attempt = 0
    while True:
        lease = ids.lease()
        try:
            return _spawn(argv, lease, overlay=overlay, limits=limits, cgroup=cgroup,
                          pass_fds=pass_fds, stdin=stdin, stdout=stdout, stderr=stderr,
                          count_own_cpu=count_own_cpu)
        except namespaces.IdBusyError:
            lease.mark_busy()  # a process of that uid lives on: try another id
            attempt += 1
            if attempt == _ID_ATTEMPTS:
                raise
        except BaseException:
            lease.release()
            raise


#: Leased ids found still in use by a live process before a sandbox gives up.
_ID_ATTEMPTS = 32


def _spawn(argv: Sequence[str], lease: ids.IdLease, *, overlay: Overlay | None,
           limits: SandboxLimits, cgroup: SandboxCgroup | None, pass_fds: Sequence[int],
           stdin: int | None, stdout: int | None, stderr: int | None,
           count_own_cpu: bool = False) -> Spawned:
    privileged = os.geteuid() == 0
    if privileged and overlay is not None:
        _own_upper(overlay.upper, lease)
    if privileged:
        _give_pipes(pass_fds, lease)
    rlimits = [r for r in _rlimits(limits)
               if not (privileged and r[0] == resource.RLIMIT_NPROC)]  # see _rlimits
    fds: list[int] = []
    try:
        info_r, info_w = _pipe(fds)
        # without a CPU cgroup, sessions are what the scheduler shares CPU by (autogroups)
        sec_r = seccomp.program_fd(contain_sessions=cgroup is None, count_own_cpu=count_own_cpu)
        fds.append(sec_r)
        # the options go through a pipe, the command stays on the command line (bwrap wants it
        # there); a bwrap_argv always has "--" before the command
        cut = list(argv).index("--")
        options = list(argv[1:cut])
        system_root = mount_root_of(options)
        publish = None
        if privileged:
            # the sandbox user may not be able to enter the directories above the scratch and
            # the staged system (a private TMPDIR); the child shows both to bwrap at mount
            # points every user can reach
            publish = _mountpoints()
            renames = {}
            if overlay is not None:
                renames[str(overlay.merged)] = str(publish / "workspace")
            options = [renames.get(a, a) for a in options]
            if system_root is not None:
                prefix = f"{system_root}/sys/"
                options = [str(publish / "system" / a[len(prefix):]) if a.startswith(prefix) else a
                           for a in options]
        own_dev = privileged and "--dev" in options
        if own_dev:
            # the sandbox's own /dev, made by the child as bwrap's --dev would be but with
            # device nodes of its own: one bind instead of bwrap's tmpfs, six binds of the
            # host's nodes and six of ours over them (each bind re-reads the mount table)
            at = options.index("--dev")
            dev = options[at + 1]
            options[at:at + 2] = ["--dev-bind", str(publish / "dev"), dev]
            for i in range(len(options) - 1):  # read-only already (see spawner.setup)
                if options[i] == "--remount-ro" and options[i + 1] == dev:
                    del options[i:i + 2]
                    break
        empty = _own_masks(options, fds)
        args_r = _args_pipe(["--info-fd", str(info_w), "--seccomp", str(sec_r), *options], fds)
        if overlay is not None and not all(d.parent == overlay.upper.parent for d in
                                           (overlay.work, overlay.merged, overlay.view)):
            raise SandboxSetupError("an Overlay's directories must share one parent (Overlay.create)")
        keep = (info_w, sec_r, args_r, *empty, *pass_fds)
        plan = namespaces.plan_for(
            argv=[argv[0], "--args", str(args_r), *argv[cut:]], keep_fds=keep,
            episode_dir=str(overlay.upper.parent) if overlay is not None else None,
            lower=str(overlay.lower) if overlay is not None else None,
            cgroup_procs=cgroup.procs_files() if cgroup else (), rlimits=rlimits, lease=lease,
            publish=str(publish) if publish else None, system_root=system_root,
            system_lowers=system_lowers(system_root) if system_root is not None else None,
            devices=OWN_DEVICES if own_dev else None)
        proc = namespaces.start(plan, stdin=stdin, stdout=stdout, stderr=stderr, keep_fds=keep,
                                lease=lease)
        for fd in keep[:len(keep) - len(pass_fds)]:
            os.close(fd)
            fds.remove(fd)
        if privileged:
            _give_pipes([f.fileno() for f in (proc.stdin, proc.stdout, proc.stderr) if f is not None],
                        lease)
        spawned = Spawned(proc)
        info = _read_info(info_r)
        if info is None:
            if proc.poll() is None:
                os.killpg(proc.pid, 9)
            proc.wait()
            raise SandboxSetupError(f"bwrap failed to start the sandbox (exit {proc.returncode})"
                                    + _output_of(proc))
        spawned.pidns = f"pid:[{info['pid-namespace']}]"
        return spawned
    finally:
        for fd in fds:
            os.close(fd)


@cache
def _mountpoints() -> Path:
    """``mnt/{workspace,system,dev}`` of root's private state (``/var/cache/proofgym``): empty
    directories the sandbox's uid can reach (every directory above them is root's, mode 0755),
    where the child (as root, in its own mount namespace) shows ``bwrap`` the workspace and the
    minimal system. Root's and writable only by root, or refused."""
    base = state_dir("mnt")
    for path in (base / "workspace", base / "system", base / "dev"):
        with contextlib.suppress(FileExistsError):
            path.mkdir(mode=0o755)
        st = path.lstat()
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0 or st.st_mode & 0o022:
            raise SandboxSetupError(f"{path} must be a directory owned by root and writable only "
                                    "by it (sandboxes see their workspace and system through it); "
                                    "remove it")
    return base


def _own_masks(options: list[str], fds: list[int]) -> list[int]:
    """Point each mask of :func:`_proc_covers` at an empty read-only file of the sandbox's own
    (in place): bwrap's ``--ro-bind-data`` of an empty pipe, a file on bwrap's private setup
    tmpfs (unlinked once bound, so each mask needs its own). Returns the pipes' read ends, for
    bwrap to inherit (also in ``fds``)."""
    ends = []
    i = 0
    while i < len(options) - 2:
        if options[i] == "--ro-bind" and options[i + 1] == _MASK and options[i + 2].startswith("/proc/"):
            empty_r, empty_w = _pipe(fds)
            os.close(empty_w)
            fds.remove(empty_w)
            options[i:i + 2] = ["--perms", "0444", "--ro-bind-data", str(empty_r)]
            ends.append(empty_r)
        i += 1
    return ends


def _pipe(fds: list[int]) -> tuple[int, int]:
    r, w = os.pipe()
    fds += [r, w]
    return r, w


def _args_pipe(args: Sequence[str], fds: list[int]) -> int:
    data = b"".join(os.fsencode(a) + b"\0" for a in args)
    r, w = _pipe(fds)
    if len(data) > 65536:  # a pipe holds 64 KiB without a reader
        raise SandboxSetupError(f"the sandbox command line is {len(data)} bytes; keep it under "
                                "64 KiB (pass large inputs as files)")
    os.write(w, data)
    os.close(w)
    fds.remove(w)
    return r


def _give_pipes(fds: Sequence[int], lease: ids.IdLease) -> None:
    """Pipes we made belong to root with mode 0600: a sandbox process that reopens one by name
    (``/dev/stdout``, ``--junitxml=/dev/fd/4``) must find it its own, as it did when the sandbox
    user was root."""
    uid, gid = lease.ids or (os.getuid(), os.getgid())
    for fd in fds:
        st = os.fstat(fd)
        if stat.S_ISFIFO(st.st_mode) and st.st_uid == 0:
            os.fchown(fd, uid, gid)


def _own_upper(upper: Path, lease: ids.IdLease) -> None:
    """The upper directory and the files put into it from the host (a grader's artifact files,
    or what an earlier sandbox of the episode wrote as another leased uid) belong to this
    sandbox's uid, as if it had written them."""
    uid, gid = lease.ids or (os.getuid(), os.getgid())
    for dirpath, dirnames, filenames in os.walk(upper):
        for name in (".", *dirnames, *filenames):
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            if st.st_uid != uid or st.st_gid != gid:
                os.lchown(path, uid, gid)


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
    """Per-process limits. As root (each sandbox its own uid; the cgroup caps processes)
    ``RLIMIT_NPROC`` is left out. Without root, where every sandbox is the user's uid,
    ``RLIMIT_MSGQUEUE`` and ``RLIMIT_SIGPENDING`` (counted per user, and per user namespace
    below it) are set to the sandbox's slot's share of the user's own limits (set in the
    sandbox's namespace, so bwrap's namespace gets them as its cap), so the sandboxes together
    never fill the user's pool and none sees another's use of it."""
    out = [(resource.RLIMIT_AS, limits.memory_mb << 20),
           (resource.RLIMIT_FSIZE, limits.max_file_size_mb << 20),
           (resource.RLIMIT_NPROC, limits.max_processes),
           (resource.RLIMIT_CORE, 0)]
    if os.geteuid() != 0:
        for res in (resource.RLIMIT_MSGQUEUE, resource.RLIMIT_SIGPENDING):
            soft, hard = resource.getrlimit(res)
            total = min(v for v in (soft, hard) if v != resource.RLIM_INFINITY) \
                if (soft, hard) != (resource.RLIM_INFINITY,) * 2 else 1 << 20
            out.append((res, max(1, total // ids.user_slots())))
    return out
