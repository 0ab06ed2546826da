"""Where proofgym keeps the state it trusts between runs, and the one check that guards it.

Caches, indexes, leases, locks and mount points are reused by later runs, so whoever can write
where they live can choose what a later run trusts. They live under the running user's state
root, which no other user can write:

* **root**: ``/var/cache/proofgym`` (mode 0755). On disk, not a tmpfs (``/run``): the staged
  system is hard-linked from ``/usr`` on the same file system, not copied into memory, and a
  snapshot cache does not take RAM. Regenerable, so ``/var/cache`` (FHS), not ``/var/lib``.
  Traversable by every user because the sandbox's leased uid reaches its mount points below it
  (``mnt/``); nothing below is writable by anyone but root.
* **an ordinary user**: ``$XDG_CACHE_HOME/proofgym``, else ``~/.cache/proofgym`` (mode 0700).

A directory is *private* (:func:`check_private`) when it and every directory above it are
owned by the user or by root and writable by no one else; a world-writable ancestor is allowed
only with the sticky bit (``/tmp``: others cannot rename or remove what they do not own), the
directory itself never. The check runs on the resolved path, and the resolved path is what is
used, so a symlink another user controls is followed at most once, to be checked. Files are
written by :func:`write_atomic` (``mkstemp`` in the target's directory, then a rename), never
through a predictable name. Overrides (``PROOFGYM_CACHE``, ``PROOFGYM_SNAPSHOT_CACHE``) are
checked the same way (:func:`override_dir`) and refused when another user could change them.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

from proofgym.core.errors import UnsafeStateDirError as UnsafeStateDirError

__all__ = ["ROOT_STATE", "UnsafeStateDirError", "cache_home", "check_private", "override_dir",
           "owned_entry", "state_dir", "state_root", "write_atomic"]

#: root's state root.
ROOT_STATE = Path("/var/cache/proofgym")


def state_root() -> Path:
    """The running user's state root (made if missing; checked every call)."""
    if os.geteuid() == 0:
        return _made(ROOT_STATE, 0o755, "proofgym's state root")
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return _made(Path(base) / "proofgym", 0o700, "proofgym's state root ($XDG_CACHE_HOME/proofgym)")


def state_dir(*parts: str) -> Path:
    """``state_root()/PART/...``: made (as the state root's mode) and checked."""
    root = state_root()
    mode = 0o755 if os.geteuid() == 0 else 0o700
    return _made(root.joinpath(*parts), mode, "a proofgym state directory")


def cache_home() -> Path:
    """``$PROOFGYM_CACHE`` (checked), else the state root: downloads, images, task trees."""
    return override_dir("PROOFGYM_CACHE") or state_root()


def override_dir(variable: str) -> Path | None:
    """The directory the environment variable ``variable`` names (made if missing, resolved and
    checked), or ``None`` when it is unset."""
    raw = os.environ.get(variable)
    if not raw:
        return None
    return _made(Path(raw), 0o755 if os.geteuid() == 0 else 0o700, f"${variable}")


def check_private(path: str | Path, what: str = "a proofgym state directory") -> Path:
    """``path`` resolved, once it and every directory above it are the user's or root's and no
    one else can write them (a sticky ancestor excepted, never ``path`` itself), and every
    symbolic link on the way is the user's or root's. Raises :class:`UnsafeStateDirError`
    saying which entry fails and why."""
    me = os.geteuid()
    lexical = Path(os.path.abspath(path))
    real = Path(os.path.realpath(lexical))
    # the path as given (its links, and what they sit in), then where it leads
    for chain, end in (((*reversed(lexical.parents), lexical), lexical),
                       ((*reversed(real.parents), real), real)):
        for d in chain:
            try:
                st = os.lstat(d)
            except OSError as exc:
                raise UnsafeStateDirError(f"{what} {path}: cannot check {d}: {exc.strerror}") from None
            why = None
            if st.st_uid not in (0, me):
                why = f"belongs to uid {st.st_uid}"
            elif stat.S_ISLNK(st.st_mode):
                continue  # (a link's target is checked as the resolved path)
            elif not stat.S_ISDIR(st.st_mode):
                why = "is not a directory"
            elif st.st_mode & 0o022 and (d == end or not st.st_mode & stat.S_ISVTX):
                why = f"is writable by others (mode {stat.S_IMODE(st.st_mode):o})"
            if why:
                raise UnsafeStateDirError(
                    f"{what} {path} cannot be trusted: {d} {why}, so another user could change "
                    f"what proofgym reuses there; use a directory only you (uid {me}) or root "
                    "can write")
    return real


def owned_entry(path: str | Path) -> bool:
    """Whether ``path`` (not followed) exists, is a directory or file of this user and is
    writable by no one else: what a reader of a private directory trusts an entry by."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)) and \
        st.st_uid == os.geteuid() and not st.st_mode & 0o022


def write_atomic(path: str | Path, data: bytes, mode: int = 0o644) -> None:
    """Replace ``path`` with ``data`` at once: written to a fresh ``mkstemp`` name in its
    directory (``O_EXCL``, never through a link), synced, then renamed over it (a crash leaves
    the old file or the new one)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            os.fchmod(f.fileno(), mode)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _made(path: Path, mode: int, what: str) -> Path:
    try:
        if not os.path.lexists(path):
            os.makedirs(path, mode=mode, exist_ok=True)
            # the mode whatever the umask: with 077, root's mnt/ would be out of the sandbox
            # user's reach
            os.chmod(path, mode)
    except OSError as exc:
        raise UnsafeStateDirError(f"cannot make {what} {path}: {exc}") from None
    return check_private(path, what)
