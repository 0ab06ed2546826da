"""What a sandbox's first process does between ``fork`` and ``exec`` of ``bwrap``.

The child gets a mount namespace of its own, mounts the workspace overlay there (so no mount of
a sandbox is ever in the host's mount table, and all of them go away with the sandbox's last
process, however the eval process ends), joins the cgroup, sets the rlimits and a fresh session
keyring, and then runs ``bwrap`` as an unprivileged host user:

* **as root** it mounts as root (an ordinary overlay, as container runtimes do), then drops to
  the sandbox user (:func:`sandbox_ids`, a fixed unprivileged uid/gid with no supplementary
  groups and no capabilities) before ``exec``. The task snapshot is attached through an
  *idmapped* mount whose files, as owned by the snapshot's owner, appear owned by the sandbox
  user, so the agent can edit them (copy-up keeps that owner) while the snapshot itself is never
  written and needs no ``chown``.
* **as an ordinary user** it enters a new user namespace (mapped to that user) and mounts the
  overlay there with ``userxattr``.

The overlay's options name its layers relative to the episode directory (``lowerdir=lower``),
so ``/proc/self/mountinfo`` inside the sandbox shows no host path.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import resource
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from proofgym.runtimes.sandbox.system import SandboxSetupError

#: The host uid and gid sandboxes run as when proofgym runs as root (override with these
#: environment variables; the ids need no account, and must not be 0 or used by anything else).
SANDBOX_UID_ENV, SANDBOX_GID_ENV = "PROOFGYM_SANDBOX_UID", "PROOFGYM_SANDBOX_GID"
DEFAULT_SANDBOX_ID = 0x7FFE0000

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_MS_RDONLY, _MS_BIND, _MS_REC, _MS_PRIVATE = 1, 4096, 0x4000, 1 << 18
_SYS_OPEN_TREE, _SYS_MOVE_MOUNT, _SYS_MOUNT_SETATTR, _SYS_KEYCTL = 428, 429, 442, 250
_OPEN_TREE_CLONE, _OPEN_TREE_CLOEXEC, _AT_EMPTY_PATH, _AT_FDCWD = 1, 0o2000000, 0x1000, -100
_MOVE_MOUNT_F_EMPTY_PATH = 4
_MOUNT_ATTR_RDONLY, _MOUNT_ATTR_NOSUID, _MOUNT_ATTR_NODEV, _MOUNT_ATTR_IDMAP = 1, 2, 4, 0x100000
_KEYCTL_JOIN_SESSION_KEYRING = 1
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.syscall.restype = ctypes.c_long


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


def sandbox_ids() -> tuple[int, int]:
    """The unprivileged host ``(uid, gid)`` of sandbox processes when proofgym runs as root."""
    ids = []
    for name in (SANDBOX_UID_ENV, SANDBOX_GID_ENV):
        raw = os.environ.get(name, str(DEFAULT_SANDBOX_ID))
        try:
            value = int(raw)
        except ValueError:
            value = -1
        if not 0 < value < 0xFFFFFFFF or value == 65535:
            raise SandboxSetupError(f"{name}={raw!r} is not a usable id: give an unused uid/gid "
                                    f"between 1 and 4294967294 (not 65535), or unset it for "
                                    f"the default {DEFAULT_SANDBOX_ID}")
        ids.append(value)
    return ids[0], ids[1]


_idmaps: dict[tuple[int, int, int, int], int] = {}
_idmaps_lock = threading.Lock()


def idmap_userns(owner: tuple[int, int], to: tuple[int, int]) -> int:
    """An fd of a user namespace mapping the host ``owner`` uid/gid to ``to`` (the sandbox
    user): what an idmapped mount of a snapshot owned by ``owner`` needs. Made once per
    process and mapping (a short-lived child holds the namespace while root writes its map)."""
    key = (*owner, *to)
    with _idmaps_lock:
        if key in _idmaps:
            return _idmaps[key]
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child: system calls only, then exit
            code = 1
            try:
                os.close(w)
                if _libc.unshare(_CLONE_NEWUSER) == 0:
                    code = 0
                    os.read(r, 1)  # hold the namespace until the parent has its fd
            finally:
                os._exit(code)
        os.close(r)
        try:
            fd = -1
            for _ in range(2000):  # until the child is in its new namespace
                if os.readlink(f"/proc/{pid}/ns/user") != os.readlink("/proc/self/ns/user"):
                    break
                if os.waitpid(pid, os.WNOHANG)[0]:
                    raise SandboxSetupError("cannot create a user namespace for the idmapped "
                                            "snapshot mount (is user.max_user_namespaces 0?)")
                time.sleep(0.0005)
            for name, text in (("uid_map", f"{owner[0]} {to[0]} 1"),
                               ("gid_map", f"{owner[1]} {to[1]} 1")):
                with open(f"/proc/{pid}/{name}", "w") as f:
                    f.write(text)
            fd = os.open(f"/proc/{pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
        finally:
            os.close(w)  # the child's read returns and it exits
            os.waitpid(pid, 0)
        _idmaps[key] = fd
        return fd


@dataclass(frozen=True)
class ChildPlan:
    """Everything the child does, computed in the parent (the child only makes system calls)."""

    privileged: bool
    drop_to: tuple[int, int] | None  # (uid, gid) to become, as root
    map_ids: tuple[int, int]  # our (uid, gid), mapped to 0 in the new user namespace, unprivileged
    episode_dir: bytes | None  # cwd while mounting: the overlay's layers are named relative to it
    lower: bytes | None  # the snapshot, attached at ``episode_dir/lower``
    options: bytes  # the overlay's mount options
    idmap_fd: int  # user namespace for the idmapped snapshot (-1: plain bind)
    cgroup_procs: tuple[str, ...]
    rlimits: tuple[tuple[int, int], ...]
    error_fd: int  # where a failure is described before the child gives up
    publish: bytes | None = None  # as root: where ``bwrap`` finds ``workspace`` and ``system``
    system_root: bytes | None = None  # a staged MinimalSystem, shown through its own overlay


def overlay_options(userxattr: bool) -> bytes:
    return b"lowerdir=lower,upperdir=upper,workdir=work" + (b",userxattr" if userxattr else b"")


def run_child(plan: ChildPlan) -> None:
    """The ``preexec_fn`` of a sandbox's ``bwrap``; on failure it writes why to
    ``plan.error_fd`` (the parent turns that into a :class:`SandboxSetupError`)."""
    try:
        _run_child(plan)
    except BaseException as exc:
        os.write(plan.error_fd, str(exc).encode(errors="replace")[:2000])
        raise


def _check(ret: int, what: str) -> int:
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return ret


def _write(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def _run_child(plan: ChildPlan) -> None:
    if plan.privileged:
        for path in plan.cgroup_procs:  # before anything else: nothing runs unaccounted
            _write(path, b"0")
        _check(_libc.unshare(_CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    else:
        uid, gid = plan.map_ids
        _check(_libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNS), "unshare(CLONE_NEWUSER|CLONE_NEWNS)")
        _write("/proc/self/setgroups", b"deny")
        _write("/proc/self/uid_map", f"0 {uid} 1".encode())
        _write("/proc/self/gid_map", f"0 {gid} 1".encode())
    _check(_libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "making / private")
    if plan.system_root is not None:
        # a file system of its own, so mountinfo names /usr by its path in it, not on the host
        os.chdir(plan.system_root)
        target = plan.publish + b"/system" if plan.publish else b"sys"
        _check(_libc.mount(b"overlay", target, b"overlay", _MS_RDONLY,
                           b"lowerdir=sys:empty" + (b"" if plan.privileged else b",userxattr")),
               "mounting the minimal system")
    if plan.episode_dir is not None and plan.lower is not None:
        os.chdir(plan.episode_dir)
        _attach_lower(plan.lower, plan.idmap_fd)
        _check(_libc.mount(b"overlay", b"merged", b"overlay", 0, plan.options),
               "mounting the workspace overlay")
        if plan.publish is not None:
            _check(_libc.mount(b"merged", plan.publish + b"/workspace", None, _MS_BIND, None),
                   "showing the workspace to the sandbox user")
    if not plan.privileged:
        for path in plan.cgroup_procs:
            _write(path, b"0")
    for res, value in plan.rlimits:
        resource.setrlimit(res, (value, value))
    if plan.drop_to is not None:
        uid, gid = plan.drop_to
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)  # from root to a non-zero uid: every capability is dropped
        if os.geteuid() != uid or os.getegid() != gid:
            raise OSError("the privilege drop did not take")
    # a new, empty session keyring: the host's session keys are not reachable from here
    _check(_libc.syscall(_SYS_KEYCTL, _KEYCTL_JOIN_SESSION_KEYRING, None), "joining a new keyring")
    os.chdir("/")


def _attach_lower(lower: bytes, idmap_fd: int) -> None:
    """The snapshot at ``./lower``: read-only, and idmapped when ``idmap_fd`` is given."""
    if idmap_fd < 0:
        _check(_libc.mount(lower, b"lower", None, _MS_BIND | _MS_REC, None), "binding the snapshot")
        return
    tree = _check(_libc.syscall(_SYS_OPEN_TREE, _AT_FDCWD, lower, _OPEN_TREE_CLONE | _OPEN_TREE_CLOEXEC),
                  "open_tree(snapshot)")
    try:
        attr = _MountAttr(_MOUNT_ATTR_IDMAP | _MOUNT_ATTR_RDONLY | _MOUNT_ATTR_NOSUID | _MOUNT_ATTR_NODEV,
                          0, 0, idmap_fd)
        try:
            _check(_libc.syscall(_SYS_MOUNT_SETATTR, tree, b"", _AT_EMPTY_PATH, ctypes.byref(attr),
                                 ctypes.sizeof(attr)), "idmapping the snapshot")
        except OSError as exc:
            raise OSError(exc.errno, f"{exc.strerror}. As root the snapshot is shown to the "
                          "unprivileged sandbox user through an idmapped mount (Linux >= 5.12; "
                          "ext4, xfs, btrfs or tmpfs >= 6.3): move the snapshot to such a file "
                          "system, or run proofgym as an ordinary user") from exc
        _check(_libc.syscall(_SYS_MOVE_MOUNT, tree, b"", _AT_FDCWD, b"lower", _MOVE_MOUNT_F_EMPTY_PATH),
               "attaching the snapshot")
    finally:
        os.close(tree)


def plan_for(*, episode_dir: str | None, lower: str | None, cgroup_procs: Sequence[str],
             rlimits: Sequence[tuple[int, int]], error_fd: int,
             publish: str | None = None, system_root: str | None = None) -> ChildPlan:
    """The :class:`ChildPlan` for this process's privileges (root or not)."""
    privileged = os.geteuid() == 0
    drop_to = sandbox_ids() if privileged else None
    idmap_fd = -1
    if privileged and lower is not None:
        st = os.stat(lower)
        assert drop_to is not None
        idmap_fd = idmap_userns((st.st_uid, st.st_gid), drop_to)
    return ChildPlan(privileged, drop_to, (os.getuid(), os.getgid()),
                     os.fsencode(episode_dir) if episode_dir else None,
                     os.fsencode(lower) if lower else None, overlay_options(not privileged),
                     idmap_fd, tuple(cgroup_procs), tuple(rlimits), error_fd,
                     os.fsencode(publish) if publish and privileged else None,
                     os.fsencode(system_root) if system_root else None)
