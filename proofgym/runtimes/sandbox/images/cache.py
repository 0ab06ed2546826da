"""The image cache: content-addressed, read-only directories built once and shared by runs.

Where: ``$PROOFGYM_CACHE/images`` if set, else ``images/`` of the user's state root
(:mod:`proofgym.runtimes.private_dirs`: ``/var/cache/proofgym`` as root, else
``$XDG_CACHE_HOME/proofgym`` or ``~/.cache/proofgym``); either is refused if another user could
write it or a directory above it. Every entry is built into a temporary sibling and renamed into
place when complete, so a reader never sees half an entry and two builders at once each
finish (the second one's rename fails and its copy is dropped).

Entries: ``wheels/`` (downloaded wheels, by file name; each is checked against its hash on
every use), ``sites/<digest>`` (a packages image's site-packages layer), ``layers/<diff id>.<mode>``
(an OCI layer, unpacked), ``oci/<digest>.json`` (an OCI image's record: its layers, config and
top-level entries). ``*.json`` records next to built images let ``proofgym image ls`` list them.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from proofgym.core.errors import ConfigError
from proofgym.runtimes.private_dirs import cache_home, check_private, owned_entry, state_dir, write_atomic

__all__ = ["build_once", "cache_root", "list_images", "mount_root", "write_record"]

#: The marker of a complete entry (a directory is only ever renamed into place with it).
COMPLETE = ".proofgym-complete"


def cache_root() -> Path:
    """The image cache's directory (made if missing)."""
    root = cache_home() / "images"
    root.mkdir(mode=0o755 if os.geteuid() == 0 else 0o700, exist_ok=True)
    return check_private(root, "the image cache")


def build_once(dest: Path, build: Callable[[Path], None]) -> Path:
    """``dest``, built by ``build(tmp)`` into a temporary sibling and renamed into place, unless
    a complete ``dest`` exists already (built by this or another process)."""
    if _complete(dest):
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        build(tmp)
        (tmp / COMPLETE).touch(mode=0o444)
        _read_only(tmp)
        try:
            tmp.rename(dest)
        except OSError:
            if not _complete(dest):  # an incomplete leftover: replace it
                remove(dest)
                tmp.rename(dest)
    finally:
        if tmp.exists():
            remove(tmp)
    return dest


def _complete(dest: Path) -> bool:
    """Whether ``dest`` is an entry this user built and finished."""
    return owned_entry(dest) and owned_entry(dest / COMPLETE)


def remove(path: Path) -> None:
    """Delete a cache entry (its directories are read-only: made writable first)."""
    if not path.exists() and not path.is_symlink():
        return
    for dirpath, dirnames, _ in os.walk(path):
        for d in (dirpath, *(os.path.join(dirpath, n) for n in dirnames)):
            if not os.path.islink(d):
                with contextlib.suppress(OSError):
                    os.chmod(d, 0o755)
    shutil.rmtree(path, ignore_errors=True)


def _read_only(root: Path) -> None:
    """No write bit on anything built (the sandbox mounts it read-only anyway; this keeps the
    host's own tools from changing a content-addressed entry by accident)."""
    for dirpath, dirnames, filenames in os.walk(root, topdown=False):
        for name in (*filenames, *dirnames):
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            if not os.path.islink(path) and st.st_mode & 0o222 and (st.st_mode & 0o170000) in (
                    0o100000, 0o040000):
                os.chmod(path, st.st_mode & ~0o222)
    os.chmod(root, 0o555)


def write_record(name: str, record: dict[str, Any]) -> Path:
    """Store ``record`` as ``records/NAME.json`` (atomically; what ``image ls`` lists)."""
    path = cache_root() / "records" / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(record, indent=1, sort_keys=True).encode())
    return path


def list_images() -> list[dict[str, Any]]:
    """The records of the images built into this cache, newest first."""
    records = []
    for path in (cache_root() / "records").glob("*.json"):
        with contextlib.suppress(OSError, ValueError):
            records.append({**json.loads(path.read_text()), "built": path.stat().st_mtime})
    return sorted(records, key=lambda r: -r["built"])


def mount_root(name: str, lowers: Sequence[Path]) -> Path:
    """A mount root (see :class:`~proofgym.runtimes.sandbox.system.SandboxSystem`) over the
    directories ``lowers`` (topmost first): ``lN`` links to them, ``sys/``, ``empty/`` and the
    ``lowerdir`` file, under ``mounts/`` of the user's private state (one per user, whose
    caches differ). Links, so the sandbox's mountinfo names ``l0``, not a host path."""
    if not name or "/" in name or name.startswith("."):
        raise ConfigError(f"an image mount root's name must be a plain file name, not {name!r}")
    root = state_dir("mounts") / f"proofgym-image-{name}"
    if _complete(root) and all(
            os.path.realpath(root / f"l{i}") == os.path.realpath(p) for i, p in enumerate(lowers)):
        return root

    def build(tmp: Path) -> None:
        for i, lower in enumerate(lowers):
            (tmp / f"l{i}").symlink_to(Path(lower).resolve())
        (tmp / "sys").mkdir()
        (tmp / "empty").mkdir()
        (tmp / "lowerdir").write_text(":".join([*(f"l{i}" for i in range(len(lowers))), "empty"]))
        for d in (tmp / "sys", tmp / "empty"):
            d.chmod(0o755)

    if root.exists():  # stale (its links point elsewhere): replace it
        remove(root)
    built = build_once(root, build)
    built.chmod(0o755)
    return built
