"""Scratch space for overlay upper directories, and its removal, also after a crash.

A scratch directory is named with the pid of the process that owns it and that pid's namespace,
so a later run in the same pid namespace can tell leftovers of a process that died (``SIGKILL``,
the OOM killer) from scratch space in use, and remove them (:func:`sweep_scratch`, run once per
parent directory and process). A pid of another namespace (a container sharing the temp dir)
cannot be checked from here: its directories are left alone.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

_MNT_DETACH = 2
_UMOUNT_NOFOLLOW = 8
_MS_NOSUID = 2
_MS_NODEV = 4
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)

_SCRATCH_NAME = re.compile(r"^proofgym-(?!system-)[a-z]+-(\d+)-(\d+)-")
_swept_scratch: set[str] = set()


def scratch_dir(prefix: str, size_mb: int, parent: str | Path | None = None) -> Path:
    """A private directory for overlay upper directories, named with this process's pid so a
    later run can remove it if this process dies without doing so (:func:`sweep_scratch`).

    As root it is a tmpfs of ``size_mb`` (root's, mode 0700: each sandbox's upper directory in
    it belongs to that sandbox's own uid), so what a sandbox writes cannot fill the host's disk;
    otherwise an ordinary temp directory. Remove it with :func:`remove_scratch`."""
    parent_dir = Path(parent) if parent is not None else Path(tempfile.gettempdir())
    if str(parent_dir) not in _swept_scratch:
        _swept_scratch.add(str(parent_dir))
        sweep_scratch(parent_dir)
    root = Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-{pid_namespace() or 0}-",
                                 dir=parent_dir))
    if os.geteuid() == 0:
        _check(_libc.mount(b"tmpfs", str(root).encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV,
                           f"size={size_mb}m,mode=0700,uid=0,gid=0".encode()),
               f"mounting a tmpfs at {root}")
    return root


def pid_namespace() -> int | None:
    """This process's pid namespace (the inode of ``/proc/self/ns/pid``), or ``None`` when the
    ``/proc`` here is another pid namespace's (then no pid under it can be checked as ours)."""
    try:
        if os.readlink("/proc/self") != str(os.getpid()):
            return None
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return None


def sweep_scratch(parent: Path) -> list[Path]:
    """Remove the scratch directories (and their tmpfs) under ``parent`` whose owning process
    is gone: what an eval process killed with SIGKILL left behind. Returns what was removed.
    Only this user's directories: in a shared temp dir another user can make one of that name
    (or swap in a link to a mount point), and it is not ours to remove or unmount. Only this
    pid namespace's: another's pids mean nothing here, and a live owner would look dead
    (``tests/security/test_attack_other_instance_sweep.py``)."""
    removed: list[Path] = []
    ours = pid_namespace()
    try:
        names = os.listdir(parent) if ours is not None else []
    except OSError:
        return removed
    for name in names:
        m = _SCRATCH_NAME.match(name)
        if (m is None or int(m.group(2)) != ours or int(m.group(1)) == os.getpid()
                or os.path.exists(f"/proc/{m.group(1)}")):
            continue
        path = parent / name
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid():
            remove_scratch(path)
            removed.append(path)
    return removed


def remove_scratch(root: Path) -> None:
    """Unmount (if mounted) and delete a :func:`scratch_dir`."""
    if os.path.ismount(root):
        _libc.umount2(str(root).encode(), _MNT_DETACH | _UMOUNT_NOFOLLOW)

    remove_tree(root)


def remove_tree(path: Path) -> None:
    """Delete ``path`` whatever the sandbox left in it: directories without permissions (as
    overlayfs leaves ``work/work``, or as the agent sets them) and trees deeper than Python's
    recursion limit (``mkdir a; cd a`` in a loop). Never follows symbolic links."""
    if not os.path.lexists(path):
        return
    try:
        shutil.rmtree(path)
        return
    except (OSError, RecursionError):
        pass  # finished below by tools that walk iteratively
    if os.geteuid() != 0:
        subprocess.run(["chmod", "-R", "u+rwX", "--", str(path)], capture_output=True, check=False)
    subprocess.run(["rm", "-rf", "--one-file-system", "--", str(path)], capture_output=True,
                   check=False)


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
