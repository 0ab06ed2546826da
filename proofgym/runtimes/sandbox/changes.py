"""Reading an overlay's upper directory as the set of files the sandbox changed.

The upper directory is written by the agent, so it is read as hostile: every entry is opened
relative to its parent directory's descriptor with ``O_NOFOLLOW`` (no path is resolved twice,
a symlink is recorded as skipped and never followed), and the walk stops at the artifact limits
of :class:`SandboxLimits` before reading content past them. Names are bytes throughout and
become ``str`` with ``os.fsdecode`` (surrogate escapes), so any file name round-trips.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from proofgym.runtimes.sandbox.limits import SandboxLimits

#: Caches are never part of an artifact: they are not the agent's work, and a planted bytecode
#: cache could stand in for a restored source file when the artifact is graded.
_SKIPPED_PARTS = frozenset({b"__pycache__", b".pytest_cache"})
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


@dataclass
class Changes:
    """What :func:`read_changes` found. ``limit_exceeded`` names the artifact limit an episode
    went over; ``files`` and ``skipped`` are then empty (nothing past a limit is read)."""

    files: dict[str, bytes | None] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    limit_exceeded: str | None = None


class _OverLimit(Exception):
    pass


def display_path(rel: bytes) -> str:
    """A path for messages and metadata: valid UTF-8, undecodable bytes shown as ``\\xNN``."""
    return rel.decode("utf-8", "backslashreplace")


def _skipped(rel: bytes) -> bool:
    return bool(_SKIPPED_PARTS.intersection(rel.split(b"/"))) or rel.endswith(b".pyc")


def _opaque(fd: int, userxattr: bool) -> bool:
    """Whether the overlay marked this upper directory opaque. Only the namespace the overlay
    itself uses counts: on a root-mounted overlay ``user.overlay.opaque`` is an ordinary xattr
    the agent may set (it would delete every file under the directory from the artifact)."""
    name = "user.overlay.opaque" if userxattr else "trusted.overlay.opaque"
    try:
        return os.getxattr(fd, name) == b"y"
    except OSError:
        return False


def _lower_files(lower: bytes, rel: bytes) -> list[bytes]:
    """Regular files under ``lower/rel`` (a file or a directory), as workspace-relative paths.
    The lower tree is the read-only task snapshot, not written by the agent."""
    base = os.path.join(lower, rel)
    if os.path.islink(base) or os.path.isfile(base):
        return [rel]
    out = []
    for dirpath, _dirs, files in os.walk(base):
        for f in files:
            out.append(os.path.relpath(os.path.join(dirpath, f), lower))
    return out


def _unchanged(lower: bytes, rel: bytes, content: bytes) -> bool:
    old = os.path.join(lower, rel)
    try:
        st = os.lstat(old)
        if not stat.S_ISREG(st.st_mode) or st.st_size != len(content):
            return False
        with open(old, "rb") as f:
            return f.read() == content
    except OSError:
        return False


class _Walk:
    def __init__(self, lower: Path, limits: SandboxLimits, userxattr: bool) -> None:
        self.lower = os.fsencode(lower)
        self.userxattr = userxattr
        self.limits = limits
        self.files: dict[bytes, bytes | None] = {}
        self.skipped: list[bytes] = []
        self.seen: set[bytes] = set()
        self.total = 0
        self.entries = 0

    def _check_path(self, rel: bytes) -> None:
        if len(rel) > self.limits.artifact_max_path_bytes:
            raise _OverLimit(f"a path is longer than {self.limits.artifact_max_path_bytes} bytes "
                             f"(artifact_max_path_bytes): {display_path(rel[:200])}...")
        self.entries += 1
        # every entry costs memory here even when it is no change: bound the walk too
        if self.entries > 4 * self.limits.artifact_max_files:
            raise _OverLimit(f"the workspace has more than {4 * self.limits.artifact_max_files} "
                             "changed entries (4 x artifact_max_files)")

    def directory(self, dfd: int, rel: bytes, depth: int = 0) -> None:
        if depth > self.limits.artifact_max_depth:
            raise _OverLimit(f"directories are nested more than {self.limits.artifact_max_depth} "
                             "deep (artifact_max_depth)")
        with os.scandir(dfd) as it:
            names = sorted(os.fsencode(e.name) for e in it)
        for name in names:
            child = rel + b"/" + name if rel else name
            self._check_path(child)
            try:
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            if stat.S_ISDIR(st.st_mode):
                self._subdirectory(dfd, name, child, depth + 1)
            elif stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:  # an overlay whiteout: deleted
                self.seen.add(child)
                if os.path.lexists(os.path.join(self.lower, child)):
                    for f in _lower_files(self.lower, child):
                        if not _skipped(f):
                            self.files[f] = None
            elif _skipped(child):
                continue
            elif stat.S_ISREG(st.st_mode):
                self.seen.add(child)
                self._file(dfd, name, child)
            else:  # symlinks, fifos, sockets: recorded, never followed
                self.seen.add(child)
                self.skipped.append(child)

    def _subdirectory(self, dfd: int, name: bytes, rel: bytes, depth: int) -> None:
        try:
            fd = _open(name, _DIR_FLAGS, dir_fd=dfd)
        except OSError:  # replaced by a link or removed since it was listed: not followed
            self.skipped.append(rel)
            return
        try:
            opaque = _opaque(fd, self.userxattr)
            self.directory(fd, rel, depth)
        finally:
            os.close(fd)
        if opaque and os.path.isdir(os.path.join(self.lower, rel)):  # deleted and re-created
            for f in _lower_files(self.lower, rel):
                if f not in self.seen and not _skipped(f):
                    self.files[f] = None

    def _file(self, dfd: int, name: bytes, rel: bytes) -> None:
        lim = self.limits
        try:
            fd = _open(name, _FILE_FLAGS, dir_fd=dfd)
        except OSError:
            self.skipped.append(rel)
            return
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                self.skipped.append(rel)
                return
            # apparent size: a sparse file counts in full, and nothing over the budget is read
            if self.total + st.st_size > lim.artifact_max_bytes:
                raise _OverLimit(f"the changed files hold more than {lim.artifact_max_bytes} bytes "
                                 f"(artifact_max_bytes; {display_path(rel)} alone has "
                                 f"{st.st_size})")
            chunks, got = [], 0
            while got <= st.st_size:
                chunk = os.read(fd, min(1 << 20, st.st_size + 1 - got))
                if not chunk:
                    break
                chunks.append(chunk)
                got += len(chunk)
            content = b"".join(chunks)[: st.st_size]
        finally:
            os.close(fd)
        if _unchanged(self.lower, rel, content):
            return
        self.total += len(content)
        self.files[rel] = content
        if len(self.files) > lim.artifact_max_files:
            raise _OverLimit(f"more than {lim.artifact_max_files} files changed "
                             "(artifact_max_files)")


def _open(name: bytes | str | Path, flags: int, dir_fd: int | None = None) -> int:
    """``os.open``, restoring our own read/search permission where the agent removed it.

    Without root the upper directory's entries belong to us (the sandbox user is our uid), and
    ``chmod 000`` inside the sandbox would otherwise hide the agent's changes from the snapshot.
    The sandbox is stopped before a snapshot, so nothing can swap the entry in between."""
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except PermissionError:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if st.st_uid != os.geteuid() or not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
            raise
        own = 0o700 if stat.S_ISDIR(st.st_mode) else 0o600
        os.chmod(name, stat.S_IMODE(st.st_mode) | own, dir_fd=dir_fd)
        return os.open(name, flags, dir_fd=dir_fd)


def read_changes(upper: Path, lower: Path, limits: SandboxLimits | None = None, *,
                 userxattr: bool | None = None) -> Changes:
    """Files written, created (new content) or deleted (``None``) relative to ``lower``, the
    paths left out (symlinks, special files), and which artifact limit was exceeded, if any.
    ``userxattr`` says the overlay was mounted with ``userxattr`` (default: as :mod:`bwrap`
    mounts it, i.e. when not root).

    A file rewritten with its original content is not a change; caches (``__pycache__``,
    ``.pytest_cache``, ``*.pyc``) are left out. Read a stopped sandbox: no process may still
    write to ``upper`` (a running one could only make the result inconsistent, never make it
    include a file outside ``upper``).
    """
    if userxattr is None:  # how bwrap.spawn mounts it: user.* xattrs only without root
        userxattr = os.geteuid() != 0
    walk = _Walk(lower, limits or SandboxLimits(), userxattr)
    fd = _open(upper, _DIR_FLAGS)
    try:
        walk.directory(fd, b"")
    except _OverLimit as exc:
        return Changes(limit_exceeded=str(exc))
    finally:
        os.close(fd)
    files = {os.fsdecode(p): c for p, c in sorted(walk.files.items())}
    return Changes(files, sorted(display_path(p) for p in walk.skipped))
