"""Starting a sandbox's ``bwrap`` through the spawner, and the process handle it returns.

What a sandbox's first process does between ``fork`` and ``exec`` of ``bwrap`` (its own mount
namespace with the overlay, the cgroup, the rlimits, the privilege drop, a fresh session
keyring) is done by the spawner program (``proofgym/programs/spawner.py``), a small single-threaded process
started once per host process: never as a ``preexec_fn`` of this (threaded, large) process. This
module computes what the child does (:func:`plan_for`), sends it there, and returns a
:class:`SandboxProcess`, which offers the part of :class:`subprocess.Popen` that the sandbox code
uses (the spawner, not this process, is ``bwrap``'s parent and reaps it; signals go through a
pidfd, so they never reach a recycled pid).

As root each sandbox runs as a uid/gid of its own, leased from the range of
:func:`sandbox_ids` (:mod:`~proofgym.runtimes.sandbox.ids`), with no supplementary groups and no
capabilities; as an ordinary user, in a user namespace mapped to that user.
"""

from __future__ import annotations

import contextlib
import marshal
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import IO, Any

from proofgym.core.errors import ConfigError
from proofgym.core.errors import IdBusyError as IdBusyError
from proofgym.runtimes import program_files
from proofgym.runtimes.sandbox import ids
from proofgym.runtimes.sandbox.ids import SANDBOX_UID_ENV
from proofgym.runtimes.sandbox.system import SandboxSetupError

SPAWNER = program_files.path("spawner")
_MAX_FDS = 64


def sandbox_ids() -> tuple[int, int]:
    """The first host ``(uid, gid)`` of the range sandboxes lease their ids from as root
    (:func:`proofgym.runtimes.sandbox.ids.id_range`); each sandbox runs as one of its own."""
    first = ids.id_range()
    return first.uid, first.gid


def overlay_options(userxattr: bool) -> bytes:
    return b"lowerdir=lower,upperdir=upper,workdir=work" + (b",userxattr" if userxattr else b"")


def plan_for(*, argv: Sequence[str], keep_fds: Sequence[int], episode_dir: str | None,
             lower: str | None, cgroup_procs: Sequence[str], rlimits: Sequence[tuple[int, int]],
             lease: ids.IdLease, publish: str | None = None,
             system_root: str | None = None, system_lowers: str | None = None,
             devices: dict[str, tuple[int, int]] | None = None) -> dict[str, Any]:
    """What the spawner's child does for this process's privileges (root or not): a dict of
    plain values (it crosses to the spawner with ``marshal``). ``keep_fds`` stay open in the
    child at the same numbers (the command line names them). As root the child drops to the
    ``lease``'s ids; without root its user namespace gets the lease's share of the user's
    inotify and fanotify pools."""
    privileged = os.geteuid() == 0
    drop_to = lease.ids if privileged else None
    if privileged and drop_to is None:
        raise SandboxSetupError("a sandbox started as root needs a leased uid/gid")
    caps = [] if privileged else [(name.encode(), value)
                                  for name, value in ids.user_namespace_caps().items()]
    idmap = None
    if privileged and lower is not None:
        st = os.stat(lower)
        idmap = ((st.st_uid, st.st_gid), drop_to)
    return {"argv": [os.fsencode(a) for a in argv], "keep": list(keep_fds),
            "privileged": privileged, "drop_to": drop_to, "map_ids": (os.getuid(), os.getgid()),
            "episode_dir": os.fsencode(episode_dir) if episode_dir else None,
            "lower": os.fsencode(lower) if lower else None,
            "options": overlay_options(not privileged), "idmap": idmap,
            "cgroup_procs": list(cgroup_procs), "rlimits": [tuple(r) for r in rlimits],
            "publish": os.fsencode(publish) if publish and privileged else None,
            "ns_caps": caps,
            "devices": [(n.encode(), major, minor) for n, (major, minor) in (devices or {}).items()],
            "system_root": os.fsencode(system_root) if system_root else None,
            "system_lowers": os.fsencode(system_lowers or "sys:empty")}


class SandboxProcess:
    """A ``bwrap`` started by the spawner: ``pid``, ``stdin``/``stdout``/``stderr``,
    ``returncode`` (negative: killed by that signal), :meth:`poll`, :meth:`wait`,
    :meth:`send_signal`, :meth:`kill`, :meth:`communicate`, as :class:`subprocess.Popen`."""

    def __init__(self, args: Sequence[str], pid: int, pidfd: int, reply: socket.socket,
                 stdin: IO[bytes] | None, stdout: IO[bytes] | None,
                 stderr: IO[bytes] | None, lease: ids.IdLease | None = None) -> None:
        self.args = list(args)
        #: the host ids it runs as, held until its exit is collected (then every process of
        #: the sandbox is gone: the pid namespace's init is reaped last)
        self.lease = lease
        self.pid = pid
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self.returncode: int | None = None
        self._pidfd = pidfd
        self._reply = reply
        self._lock = threading.Lock()  # reading the status (held while waiting for it)
        self._pidfd_lock = threading.Lock()  # using or closing the pidfd (never held long)

    def _collect(self, timeout: float | None) -> bool:
        """Read the exit status the spawner sends once it has reaped the process; ``False`` if
        it did not come within ``timeout``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if not self._lock.acquire(timeout=-1 if timeout is None else max(0.0, timeout)):
            return False
        try:
            if self.returncode is not None:
                return True
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self._reply], [], [], remaining)[0]:
                return False
            data = self._reply.recv(64)
            if data[:1] == b"S":
                self.returncode = os.waitstatus_to_exitcode(int.from_bytes(data[1:5], "big", signed=True))
            else:  # the spawner is gone, and with it (--die-with-parent) this bwrap
                self.returncode = -signal.SIGKILL
            self._release()
            return True
        finally:
            self._lock.release()

    def _release(self) -> None:
        self._reply.close()
        if self.lease is not None:
            self.lease.release()
        with self._pidfd_lock:
            if self._pidfd >= 0:
                os.close(self._pidfd)
                self._pidfd = -1

    def poll(self) -> int | None:
        self._collect(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._collect(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        # not under the status lock: another thread may be waiting for the exit this causes
        with self._pidfd_lock, contextlib.suppress(ProcessLookupError):
            if self._pidfd >= 0:
                signal.pidfd_send_signal(self._pidfd, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def communicate(self, input: bytes | None = None,
                    timeout: float | None = None) -> tuple[bytes | None, bytes | None]:
        """Write ``input``, read ``stdout``/``stderr`` to their end, wait for the exit."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if self.stdin is not None:
            with contextlib.suppress(BrokenPipeError):
                if input:
                    self.stdin.write(input)
                self.stdin.close()
        pipes = [f for f in (self.stdout, self.stderr) if f is not None]
        out = {id(f): bytearray() for f in pipes}
        streams = {f.fileno(): f for f in pipes}
        while streams:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            for fd in select.select(list(streams), [], [], remaining)[0]:
                chunk = os.read(fd, 1 << 16)
                if chunk:
                    out[id(streams[fd])] += chunk
                else:
                    streams.pop(fd).close()
        self.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return tuple(None if f is None else bytes(out[id(f)])  # type: ignore[return-value]
                     for f in (self.stdout, self.stderr))

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            if self._pidfd >= 0:
                os.close(self._pidfd)
                self._pidfd = -1


class _Spawner:
    """This process's spawner (one per host process: a forked child starts its own)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner = -1
        self._control: socket.socket | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._owned: dict[bytes, str] = {}  # what the spawner removes if this process dies
        os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        # a forked child must not hold the parent's control socket (the spawner ends when the
        # parent's last copy closes) nor send on it
        if self._control is not None:
            with contextlib.suppress(OSError):
                self._control.close()
        self._control = self._proc = None
        self._owner = -1
        self._owned = {}  # the parent's: its spawner removes them, not the child's

    def _connection(self, restart: bool = False) -> socket.socket:
        with self._lock:
            if restart or self._owner != os.getpid() or self._control is None:
                if self._control is not None:
                    self._control.close()
                ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
                with theirs:
                    # exec'd (no preexec_fn): safe from a threaded process; no site, no
                    # environment-driven imports; its own session, so a terminal's ^C is ours
                    self._proc = subprocess.Popen(
                        [sys.executable, "-I", "-S", "-B", str(SPAWNER), str(theirs.fileno())],
                        pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                        start_new_session=True)
                self._control, self._owner = ours, os.getpid()
                for path, kind in self._owned.items():  # a restarted spawner: tell it again
                    with contextlib.suppress(OSError):
                        ours.send(marshal.dumps({"op": "own", "path": path, "kind": kind}))
            return self._control

    def own(self, path: str | os.PathLike[str], kind: str) -> None:
        """Have the spawner remove ``path`` (a scratch directory, or a cgroup directory with
        ``kind="cgroup"``) once this process is gone, whatever way it goes; starts the spawner."""
        key = os.fsencode(path)
        with self._lock:
            self._owned[key] = kind
        self.send(marshal.dumps({"op": "own", "path": key, "kind": kind}), [])

    def disown(self, path: str | os.PathLike[str]) -> None:
        """This process removed ``path`` itself: the spawner forgets it."""
        key = os.fsencode(path)
        with self._lock:
            if self._owned.pop(key, None) is None or self._owner != os.getpid():
                return
            control = self._control
        if control is not None:
            with contextlib.suppress(OSError):
                control.send(marshal.dumps({"op": "disown", "path": key}))

    def release(self, cgroup_procs: Sequence[str]) -> None:
        """The cgroup is about to be removed: the spawner's helper in it (if any) exits, and
        this returns once it has."""
        with self._lock:
            control = self._control if self._owner == os.getpid() else None
        if control is None:  # no spawner here, so no helper in any cgroup
            return
        reply, remote = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with reply:
            with remote:
                try:
                    socket.send_fds(control, [marshal.dumps({"op": "release",
                                                             "cgroup_procs": list(cgroup_procs)})],
                                    [remote.fileno()])
                except OSError:  # the spawner is gone, and its helpers with it
                    return
            reply.settimeout(10.0)
            with contextlib.suppress(OSError):
                reply.recv(8)

    def send(self, data: bytes, fds: Sequence[int]) -> None:
        for attempt in (False, True):
            control = self._connection(restart=attempt)
            try:
                socket.send_fds(control, [data], list(fds))
                return
            except (BrokenPipeError, ConnectionResetError):
                if attempt:
                    raise SandboxSetupError("the sandbox spawner process exited; see its "
                                            "output above") from None


_spawner = _Spawner()


def remove_at_exit(path: str | os.PathLike[str], kind: str = "scratch") -> None:
    """Have this process's spawner unmount and delete the scratch directory ``path`` (or, with
    ``kind="cgroup"``, remove the cgroup directory ``path``) when this process is gone without
    doing so: an exit without ``close()``, ``os._exit``, ``SIGKILL``. The spawner first kills
    and waits for every sandbox it started for this process."""
    if kind not in ("scratch", "cgroup"):
        raise ConfigError(f"kind must be 'scratch' or 'cgroup', not {kind!r}")
    _spawner.own(path, kind)


def removed(path: str | os.PathLike[str]) -> None:
    """``path`` (of :func:`remove_at_exit`) was removed by this process: forget it."""
    _spawner.disown(path)


def release_cgroup(cgroup_procs: Sequence[str]) -> None:
    """Before a sandbox cgroup is removed: the spawner's helper in it exits (see
    ``Loop`` in ``proofgym/programs/spawner.py``)."""
    _spawner.release(cgroup_procs)


def start(plan: dict[str, Any], *, stdin: int | None, stdout: int | None, stderr: int | None,
          keep_fds: Sequence[int] = (), lease: ids.IdLease | None = None) -> SandboxProcess:
    """Start ``plan`` (a :func:`plan_for`) in the spawner. ``stdin``/``stdout``/``stderr`` as for
    :class:`subprocess.Popen` (``PIPE``, ``DEVNULL``, ``STDOUT`` for stderr, a descriptor, or
    ``None``: this process's own). Raises :class:`SandboxSetupError` with what the child
    reported if it could not set the sandbox up."""
    ours: list[int] = []  # our ends of pipes we made, wrapped as files at the end
    theirs: list[int] = []  # what the child gets, closed here once sent
    child_std: list[int] = []
    try:
        for i, how in enumerate((stdin, stdout, stderr)):
            if how == subprocess.PIPE:
                r, w = os.pipe()
                child_end, our_end = (r, w) if i == 0 else (w, r)
                ours.append(our_end)
                theirs.append(child_end)
                child_std.append(child_end)
            else:
                ours.append(-1)
                if how == subprocess.DEVNULL:
                    fd = os.open(os.devnull, os.O_RDWR)
                    theirs.append(fd)
                    child_std.append(fd)
                elif how == subprocess.STDOUT and i == 2:
                    child_std.append(child_std[1])
                else:
                    child_std.append(i if how is None else int(how))
        err_r, err_w = os.pipe()
        theirs.append(err_w)
        reply, remote = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            with remote:
                _spawner.send(marshal.dumps(plan), [remote.fileno(), *child_std, err_w, *keep_fds])
            for fd in theirs:
                os.close(fd)
            theirs = []
            msg, fds, _, _ = socket.recv_fds(reply, 4096, 1)
        except BaseException:
            reply.close()
            os.close(err_r)
            raise
        with os.fdopen(err_r, "rb") as err:
            why = err.read()  # until the child's exec (close-on-exec) or its exit
        if msg[:1] != b"P" or not fds:
            reply.close()
            raise SandboxSetupError(_setup_error(msg[1:] if msg[:1] == b"E" else b"the sandbox "
                                                 b"spawner exited"))
        files = [None if fd < 0 else open(fd, "wb" if i == 0 else "rb")  # noqa: SIM115
                 for i, fd in enumerate(ours)]
        ours = []
        proc = SandboxProcess(plan["argv"], int.from_bytes(msg[1:9], "big"), fds[0], reply,
                              *files, lease=lease)
        if why:
            proc.wait()
            for f in files:
                if f is not None:
                    f.close()
            if ids.ID_BUSY.encode() in why:
                raise IdBusyError(why.decode(errors="replace"))
            raise SandboxSetupError(_setup_error(why))
        return proc
    finally:
        for fd in (*ours, *theirs):
            if fd >= 0:
                os.close(fd)


def _setup_error(why: bytes) -> str:
    if os.geteuid() == 0:
        hint = ("As root the sandbox is set up in a private mount namespace and then run as the "
                f"unprivileged sandbox user ({SANDBOX_UID_ENV}).")
    else:
        hint = ("The kernel must allow unprivileged user namespaces (sysctl "
                "kernel.unprivileged_userns_clone=1) and overlayfs in them (Linux >= 5.11).")
    return (f"could not prepare the sandbox's namespace and overlay: "
            f"{why.decode(errors='replace').strip()}. {hint}")
