"""The fresh sandbox a grading runs in: the task snapshot, the artifact's allowed changes and
the grader's own files, with protected paths restored (used by :mod:`proofgym.verify.sandboxed`
and :mod:`proofgym.verify.sandboxed.program`)."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import stat
import subprocess
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from proofgym.core.errors import ArtifactRejected as ArtifactRejected
from proofgym.runtimes.grading_lease import grading_lease
from proofgym.runtimes.sandbox import (
    SandboxHome,
    SandboxLimits,
    SandboxSystem,
    Spawned,
    ansi_c_quote,
)

#: Files pytest reads as configuration (in the order it looks for them at a directory), plus the
#: interpreter's own startup hooks: never taken from the artifact, whatever a task protects.
CONFIG_FILES = ("pytest.toml", ".pytest.toml", "pytest.ini", ".pytest.ini", "pyproject.toml",
                "tox.ini", "setup.cfg")
ALWAYS_PROTECTED = (*CONFIG_FILES, "conftest.py", "sitecustomize.py", "usercustomize.py")
#: Protected by default: the tests and everything that configures pytest.
DEFAULT_PROTECTED = ("tests", "test", *ALWAYS_PROTECTED)


_CLEANUP = ThreadPoolExecutor(1, thread_name_prefix="proofgym-grade-cleanup")
_AGENT_OS_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.ENAMETOOLONG, errno.EISDIR,
                    errno.ENOTDIR, errno.EEXIST, errno.ENOTEMPTY, errno.ELOOP}


def is_protected(path: str, protected: Iterable[str]) -> bool:
    """Whether ``path`` (workspace-relative) falls under a protected entry.

    An entry without ``/`` matches any path component (``conftest.py`` anywhere, any ``tests``
    directory); an entry with ``/`` matches that path and everything under it.
    """
    parts = PurePosixPath(path).parts
    for entry in protected:
        entry = entry.strip("/")
        if "/" in entry:
            if path == entry or path.startswith(entry + "/"):
                return True
        elif entry in parts:
            return True
    return False


def _safe_relpath(path: str) -> bool:
    """A relative path in its one canonical spelling: no ``..``, and no empty or ``.`` component
    (``a//b``, ``a/``, ``./a``), which the runner would otherwise meet as a name ``''``."""
    if not isinstance(path, str) or not path or "\x00" in path:
        return False
    p = PurePosixPath(path)
    return path != "." and not p.is_absolute() and ".." not in p.parts and p.as_posix() == path


def check_artifact(changes: Mapping[str, bytes | None], *, max_bytes: int) -> str | None:
    """Why these changes cannot be applied as a tree, or ``None``: a path under another changed
    file's path or under a deleted path, or more than ``max_bytes`` of content in all."""
    total = sum(len(c) for c in changes.values() if c is not None)
    if total > max_bytes:
        return (f"the changed files hold {total} bytes, over the grading limit of {max_bytes} "
                "bytes")
    paths = sorted(changes)
    for path in paths:
        for parent in PurePosixPath(path).parents:
            p = str(parent)
            if p in changes and p != ".":
                kind = "deleted" if changes[p] is None else "a file"
                return f"{path!r} lies under {p!r}, which the artifact also lists as {kind}"
    return None


def split_changes(changes: Mapping[str, bytes | None], protected: Sequence[str]
                  ) -> tuple[dict[str, bytes | None], list[str]]:
    """The changes grading applies, and the paths it drops (unsafe or protected)."""
    protected = (*protected, *ALWAYS_PROTECTED)
    allowed: dict[str, bytes | None] = {}
    dropped: list[str] = []
    for path, content in changes.items():
        if not _safe_relpath(path) or is_protected(path, protected):
            dropped.append(path)
        else:
            allowed[path] = content
    return allowed, dropped


@dataclass
class Booted:
    """A started grading sandbox: its process and the home (scratch space, cgroup) it runs in."""

    proc: subprocess.Popen[bytes]
    spawned: Spawned
    home: SandboxHome

    def close(self, *, wait: bool = False, then: Callable[[], None] | None = None) -> None:
        """Kill what still runs in it and remove its cgroup and scratch directory (in the
        background unless ``wait``); ``then`` runs once that is done (its grading lease goes
        when no process of the sandbox is left), also when it fails."""
        try:
            if self.proc.poll() is None:
                kill_sandbox(self.proc)
            for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                if stream is not None and not stream.closed:
                    stream.close()
            self.spawned.detach_mount()
        except BaseException:
            if then is not None:
                then()
            raise

        def tidy() -> None:
            try:
                self.home.close()
            finally:
                if then is not None:
                    then()
        if wait:
            tidy()
        else:
            _CLEANUP.submit(tidy)  # the grade does not wait


def start_sandbox(snapshot: Path, allowed: Mapping[str, bytes | None],
                  extra: Mapping[str, bytes], *, command: Sequence[str], limits: SandboxLimits,
                  packages: Sequence[str], pass_fds: Sequence[int] = (),
                  stdin: int | None = subprocess.DEVNULL,
                  stderr: int | None = subprocess.STDOUT,
                  image: SandboxSystem | None = None, count_own_cpu: bool = False) -> Booted:
    """A fresh sandbox over ``snapshot`` plus ``allowed`` then ``extra`` (the grader's files),
    running ``command`` (on ``image``, else the minimal system with ``packages``; with
    ``count_own_cpu`` it may count its own CPU time, see
    :func:`~proofgym.runtimes.sandbox.seccomp.filter_program`). Raises
    :class:`ArtifactRejected` when the changes cannot be written (their fault),
    :class:`SandboxSetupError` for host faults."""
    allowed = _yield_to(allowed, extra)
    home = SandboxHome(limits, packages=packages, prefix="proofgym-grade-", image=image)
    try:
        overlay = home.overlay(snapshot, "ep")
        try:
            deleted = _apply(overlay.upper, snapshot, allowed)
            _apply(overlay.upper, snapshot, extra)
        except OSError as exc:
            if exc.errno not in _AGENT_OS_ERRORS:
                raise
            raise ArtifactRejected(f"the artifact cannot be applied: {exc.strerror} "
                                   f"({exc.filename})") from None
        command = list(command) if not deleted else [  # without root, no whiteouts: delete in there
            "bash", "--noprofile", "--norc", "-c",
            "rm -f -- " + " ".join(ansi_c_quote(p) for p in deleted) + "; exec \"$@\"", "bash",
            *command]
        spawned = home.boot(overlay, command, pass_fds=pass_fds, stdin=stdin,
                            stdout=subprocess.PIPE, stderr=stderr, count_own_cpu=count_own_cpu)
    except BaseException:
        _CLEANUP.submit(home.close)
        raise
    return Booted(spawned.proc, spawned, home)


@contextlib.contextmanager
def grading_sandbox(snapshot: Path, allowed: Mapping[str, bytes | None],
                    extra: Mapping[str, bytes], *, command: Sequence[str],
                    limits: SandboxLimits, packages: Sequence[str], pass_fds: Sequence[int] = (),
                    stdin: int | None = subprocess.DEVNULL,
                    stderr: int | None = subprocess.STDOUT,
                    image: SandboxSystem | None = None,
                    hidden_key: str | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """:func:`start_sandbox` as a context: killed and tidied on exit. With ``hidden_key`` (the
    grader's files are hidden material) it holds a grading lease on the key from before the
    sandbox starts until no process of it is left."""
    lease = grading_lease(hidden_key) if hidden_key is not None else None
    try:
        booted = start_sandbox(snapshot, allowed, extra, command=command, limits=limits,
                               packages=packages, pass_fds=pass_fds, stdin=stdin, stderr=stderr,
                               image=image)
    except BaseException:
        if lease is not None:
            lease.release()
        raise
    try:
        yield booted.proc
    finally:
        booted.close(then=lease.release if lease is not None else None)


def _yield_to(allowed: Mapping[str, bytes | None], extra: Mapping[str, bytes]
              ) -> dict[str, bytes | None]:
    """The artifact's changes without those in the way of a grader's file: the same path (a
    deletion would remove the grader's file, or leave a whiteout it cannot be written over), a
    file where the grader's file needs a directory, or a path under the grader's file."""
    if not extra:
        return dict(allowed)
    taken = set(extra)
    parents = {str(p) for path in extra for p in PurePosixPath(path).parents}
    return {path: content for path, content in allowed.items()
            if path not in taken and path not in parents
            and not any(str(p) in taken for p in PurePosixPath(path).parents)}


def _apply(upper: Path, snapshot: Path, files: Mapping[str, bytes | None]) -> list[str]:
    """Write ``files`` into the overlay's upper directory; deletions become whiteouts (as root)
    or are returned, to be deleted inside the sandbox."""
    deleted = []
    for path, content in files.items():
        target = upper / path
        if content is None:
            if (snapshot / path).exists() or (snapshot / path).is_symlink():
                deleted.append(path)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    if deleted and os.geteuid() == 0:  # overlay whiteouts: deleted before anything runs
        for path in deleted:
            (upper / path).parent.mkdir(parents=True, exist_ok=True)
            os.mknod(upper / path, 0o600 | stat.S_IFCHR, 0)
        deleted = []
    return deleted


def files_under(root: Path) -> dict[str, bytes]:
    """Regular files under ``root`` by relative path (caches left out); ``{}`` if it is missing."""
    if not root.is_dir():
        return {}
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}


def kill_sandbox(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    finally:
        proc.wait()
