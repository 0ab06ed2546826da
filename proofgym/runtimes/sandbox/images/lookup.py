"""Looking a path up in the merged view of unpacked layers, as the sandbox's overlay shows it,
from the host: symbolic links resolved *inside* the image (an absolute target starts at the
image's root), never through the host's file system (each layer is walked with ``O_NOFOLLOW``
directory descriptors)."""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path

__all__ = ["find_program", "resolve"]

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_MAX_LINKS = 40


def _opaque(fd: int) -> bool:
    try:
        return os.getxattr(fd, "user.overlay.opaque") == b"y"
    except OSError:
        return False


def _in_layer(layer: Path, parts: Sequence[str]) -> tuple[os.stat_result | None, bool, str | None]:
    """The entry ``parts`` in one layer (``None``: not there), whether the layers below are
    hidden at it (a whiteout, a non-directory or an opaque directory on the way), and the
    entry's target when it is a symbolic link."""
    try:
        fd = os.open(layer, _DIR)
    except OSError:
        return None, False, None
    hides = False
    try:
        for i, part in enumerate(parts):
            hides = hides or _opaque(fd)
            try:
                st = os.stat(part, dir_fd=fd, follow_symlinks=False)
            except OSError:
                return None, hides, None
            if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:
                return None, True, None  # a whiteout
            if i == len(parts) - 1:
                link = os.readlink(part, dir_fd=fd) if stat.S_ISLNK(st.st_mode) else None
                return st, True, link
            if not stat.S_ISDIR(st.st_mode):
                return None, True, None  # a file or link here replaces what lies below
            new = os.open(part, _DIR, dir_fd=fd)
            os.close(fd)
            fd = new
        return None, hides, None
    finally:
        os.close(fd)


def _merged(layers: Sequence[Path], parts: Sequence[str]) -> tuple[os.stat_result, str | None] | None:
    for layer in layers:  # topmost first
        st, hides, link = _in_layer(layer, parts)
        if st is not None:
            return st, link
        if hides:
            return None
    return None


def resolve(layers: Sequence[Path], path: str) -> os.stat_result | None:
    """What ``path`` (absolute, in the image) is once every link is followed inside the image;
    ``None`` if it does not exist (or the links go round)."""
    todo = [p for p in path.split("/") if p]
    done: list[str] = []
    links = 0
    st = None
    while todo:
        part = todo.pop(0)
        if part == ".":
            continue
        if part == "..":
            done = done[:-1]
            continue
        found = _merged(layers, [*done, part])
        if found is None:
            return None
        st, target = found
        if target is not None:
            links += 1
            if links > _MAX_LINKS:
                return None
            if target.startswith("/"):
                done = []
            todo = [p for p in target.split("/") if p] + todo
            st = None
            continue
        done.append(part)
    return st


def find_program(layers: Sequence[Path], name: str, search_path: str) -> str | None:
    """Where ``name`` (a path, or a name looked up on ``search_path``) is an executable file in
    the image, or ``None``."""
    for candidate in ([name] if "/" in name else
                      [f"{d.rstrip('/')}/{name}" for d in search_path.split(":") if d.startswith("/")]):
        st = resolve(layers, candidate)
        if st is not None and stat.S_ISREG(st.st_mode) and st.st_mode & 0o111:
            return candidate
    return None
