"""Reading an overlay's upper directory as the set of files the sandbox changed."""

from __future__ import annotations

import os
import stat
from pathlib import Path

#: Caches are never part of an artifact: they are not the agent's work, and a planted bytecode
#: cache could stand in for a restored source file when the artifact is graded.
_SKIPPED_PARTS = frozenset({"__pycache__", ".pytest_cache"})


def _opaque(path: Path) -> bool:
    for name in ("trusted.overlay.opaque", "user.overlay.opaque"):
        try:
            if os.getxattr(path, name, follow_symlinks=False) == b"y":
                return True
        except OSError:
            continue
    return False


def _lower_files(lower: Path, rel: str) -> list[str]:
    """Regular files under ``lower/rel`` (a file or a directory), as workspace-relative paths."""
    base = lower / rel
    if base.is_symlink() or base.is_file():
        return [rel]
    out = []
    for dirpath, _dirs, files in os.walk(base):
        for f in files:
            out.append(os.path.relpath(os.path.join(dirpath, f), lower))
    return out


def _skipped(rel: str) -> bool:
    parts = rel.split("/")
    return bool(_SKIPPED_PARTS.intersection(parts)) or rel.endswith(".pyc")


def read_changes(upper: Path, lower: Path) -> tuple[dict[str, bytes | None], list[str]]:
    """Files written, created (new content) or deleted (``None``) relative to ``lower``, and the
    paths left out (symlinks, special files, caches).

    A file rewritten with its original content is not a change. ``upper`` must not be mounted
    for writing while this runs (snapshot a stopped or idle sandbox).
    """
    files: dict[str, bytes | None] = {}
    skipped: list[str] = []
    for dirpath, dirnames, filenames in os.walk(upper):
        reldir = os.path.relpath(dirpath, upper)
        reldir = "" if reldir == "." else reldir
        for d in list(dirnames):
            rel = os.path.join(reldir, d)
            full = Path(dirpath) / d
            if full.is_symlink():  # os.walk lists a symlink to a directory here; never followed
                skipped.append(rel)
                continue
            if _opaque(full) and (lower / rel).is_dir():  # deleted and re-created: lower hidden
                upper_has = {os.path.relpath(os.path.join(dp, f), upper)
                             for dp, _d, fs in os.walk(full) for f in fs}
                for f in _lower_files(lower, rel):
                    if f not in upper_has and not _skipped(f):
                        files[f] = None
        for name in filenames:
            rel = os.path.join(reldir, name)
            full = Path(dirpath) / name
            st = full.lstat()
            if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:  # an overlay whiteout: deleted
                for f in _lower_files(lower, rel) if (lower / rel).exists() else []:
                    if not _skipped(f):
                        files[f] = None
                continue
            if _skipped(rel):
                continue
            if not stat.S_ISREG(st.st_mode):
                skipped.append(rel)
                continue
            content = full.read_bytes()
            old = lower / rel
            if old.is_file() and not old.is_symlink() and old.stat().st_size == len(content) \
                    and old.read_bytes() == content:
                continue
            files[rel] = content
    return dict(sorted(files.items())), sorted(skipped)
