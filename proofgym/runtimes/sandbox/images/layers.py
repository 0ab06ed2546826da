"""Unpacking one OCI/Docker layer tar into a directory an overlay can use as a lower layer.

The tar is untrusted input. Every entry is written relative to directory descriptors opened
one component at a time with ``O_NOFOLLOW``, so nothing is ever written through a symbolic
link (one the tar made, pointing anywhere, or any other); a name that is absolute or has a
``..`` component, a device node or a FIFO, a hard link to anything but a regular file of the
same layer, and a name through a symbolic link of the layer are refused with
:class:`LayerError`. Ownership, extended attributes and set-uid/set-gid/sticky bits of the tar
are never applied.

Whiteouts become overlayfs whiteouts: ``.wh.NAME`` a character device 0:0 named ``NAME``
(allowed without privilege), ``.wh..wh..opq`` the parent's *opaque* mark, an extended
attribute (``user.overlay.opaque``, read by an overlay mounted with ``userxattr``, as without
root; as root also ``trusted.overlay.opaque``).
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import hashlib
import os
import stat
import tarfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import IO

from proofgym.core.errors import LayerError as LayerError

__all__ = ["LayerError", "unpack_layer"]

_OPAQUE = ".wh..wh..opq"
_WHITEOUT = ".wh."
#: How often (in bytes of the layer read) :func:`unpack_layer` reports progress.
PROGRESS_BYTES = 128 << 20
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class _Hashing:
    """A read-only stream that hashes what passes through it."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw
        self.hash = hashlib.sha256()
        self.size = 0

    def read(self, n: int = -1) -> bytes:
        data = self.raw.read(n)
        self.hash.update(data)
        self.size += len(data)
        return data

    def drain(self) -> None:
        while self.read(1 << 20):
            pass


def _components(name: str, what: str) -> list[str]:
    if name.startswith("/") or "\0" in name:
        raise LayerError(f"{what} {name!r} is an absolute path: refused")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise LayerError(f"{what} {name!r} has a '..' component: refused")
    return parts


def _open_dir(root_fd: int, parts: list[str], name: str, *, create: bool) -> int:
    """A descriptor of the directory ``parts`` under ``root_fd``, never through a link."""
    fd = os.dup(root_fd)
    try:
        for part in parts:
            try:
                new = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise LayerError(f"layer entry {name!r}: {part!r} does not exist") from None
                os.mkdir(part, 0o755, dir_fd=fd)
                new = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise LayerError(f"layer entry {name!r} lies under {part!r}, which is not a "
                                     "directory (a symbolic link or a file): refused") from None
                raise
            os.close(fd)
            fd = new
        return fd
    except BaseException:
        os.close(fd)
        raise


def _clear(dir_fd: int, name: str) -> None:
    """Remove what ``name`` is in the directory (a later entry replaces an earlier one)."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
        try:
            os.fchmod(fd, 0o755)
            for child in os.listdir(fd):
                _clear(fd, child)
        finally:
            os.close(fd)
        os.rmdir(name, dir_fd=dir_fd)
    else:
        os.unlink(name, dir_fd=dir_fd)


def _set_opaque(fd: int) -> None:
    os.setxattr(fd, "user.overlay.opaque", b"y")
    if os.geteuid() == 0:
        os.setxattr(fd, "trusted.overlay.opaque", b"y")


def unpack_layer(stream: IO[bytes], dest: Path,
                 on_progress: Callable[[int], None] | None = None) -> tuple[str, str]:
    """Unpack the layer tar ``stream`` (plain or gzip) into the empty directory ``dest``.
    Returns ``(digest of the bytes read, digest of the uncompressed tar)``, both
    ``sha256:HEX``: the caller checks them against the manifest and the image config.
    ``on_progress(bytes read)`` is called about every :data:`PROGRESS_BYTES`."""
    outer = _Hashing(stream)
    head = outer.read(4)
    if head.startswith(b"\x28\xb5\x2f\xfd"):
        raise LayerError("zstd-compressed layers are not supported: save the image with gzip "
                         "or uncompressed layers (docker save, podman save --format oci-archive)")
    prefix = _Prefixed(head, outer)
    inner = _Hashing(gzip.GzipFile(fileobj=prefix) if head[:2] == b"\x1f\x8b" else prefix)  # type: ignore[arg-type]
    root_fd = os.open(dest, _DIR_FLAGS)
    modes: list[tuple[list[str], int]] = []
    try:
        try:
            with tarfile.open(fileobj=inner, mode="r|") as tar:  # type: ignore[call-overload]
                mark = PROGRESS_BYTES
                for member in tar:
                    _entry(tar, member, root_fd, modes)
                    if on_progress is not None and outer.size >= mark:
                        on_progress(outer.size)
                        mark = outer.size + PROGRESS_BYTES
        except (tarfile.TarError, EOFError, gzip.BadGzipFile, zlib.error) as exc:
            raise LayerError(f"the layer is not a readable tar archive: {exc}") from None
        inner.drain()
        outer.drain()
        # directories last: one without a write bit would have refused its own entries
        for parts, mode in reversed(modes):
            fd = _open_dir(root_fd, parts, "/".join(parts), create=False)
            try:
                os.fchmod(fd, mode)
            finally:
                os.close(fd)
    finally:
        os.close(root_fd)
    return f"sha256:{outer.hash.hexdigest()}", f"sha256:{inner.hash.hexdigest()}"


class _Prefixed:
    """``head`` then the rest of ``raw``: the bytes sniffed for the compression, put back."""

    def __init__(self, head: bytes, raw: _Hashing) -> None:
        self.head, self.raw = head, raw

    def read(self, n: int = -1) -> bytes:
        if self.head:
            if n < 0:
                data, self.head = self.head + self.raw.read(), b""
                return data
            data, self.head = self.head[:n], self.head[n:]
            return data + (self.raw.read(n - len(data)) if len(data) < n else b"")
        return self.raw.read(n)


def _entry(tar: tarfile.TarFile, member: tarfile.TarInfo, root_fd: int,
           modes: list[tuple[list[str], int]]) -> None:
    parts = _components(member.name, "layer entry")
    if not parts:
        return  # the layer's root itself ("./")
    *parent, base = parts
    if member.ischr() or member.isblk() or member.isfifo():
        raise LayerError(f"layer entry {member.name!r} is a device node or FIFO: refused "
                         "(the sandbox makes its own /dev)")
    if not (member.isreg() or member.isdir() or member.issym() or member.islnk()):
        raise LayerError(f"layer entry {member.name!r} has an unsupported type {member.type!r}")
    dir_fd = _open_dir(root_fd, parent, member.name, create=True)
    try:
        if base == _OPAQUE:
            _set_opaque(dir_fd)
            return
        if base.startswith(_WHITEOUT):
            target = base[len(_WHITEOUT):]
            if not target or target in (".", "..") or target.startswith(_WHITEOUT):
                raise LayerError(f"layer entry {member.name!r} is not a valid whiteout")
            _clear(dir_fd, target)
            os.mknod(target, 0o600 | stat.S_IFCHR, 0, dir_fd=dir_fd)
            return
        mode = member.mode & 0o777
        if member.isdir():
            with contextlib.suppress(FileNotFoundError):
                if not stat.S_ISDIR(os.stat(base, dir_fd=dir_fd, follow_symlinks=False).st_mode):
                    _clear(dir_fd, base)
            with contextlib.suppress(FileExistsError):
                os.mkdir(base, 0o755, dir_fd=dir_fd)
            modes.append((parts, mode | 0o500))  # the owner (the host) can always list it
            return
        _clear(dir_fd, base)
        if member.issym():
            os.symlink(member.linkname, base, dir_fd=dir_fd)
        elif member.islnk():
            *lparent, lbase = _components(member.linkname, "hard link target") or [""]
            src_fd = _open_dir(root_fd, lparent, member.linkname, create=False)
            try:
                st = os.stat(lbase, dir_fd=src_fd, follow_symlinks=False)
                if not stat.S_ISREG(st.st_mode):
                    raise LayerError(f"hard link {member.name!r} -> {member.linkname!r}: only a "
                                     "regular file of the layer can be linked to")
                os.link(lbase, base, src_dir_fd=src_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                raise LayerError(f"hard link {member.name!r} -> {member.linkname!r}: the target "
                                 "is not in the layer (before the link)") from None
            finally:
                os.close(src_fd)
        else:
            fd = os.open(base, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                         0o600, dir_fd=dir_fd)
            try:
                src = tar.extractfile(member)
                assert src is not None
                with os.fdopen(fd, "wb", closefd=False) as out:
                    while chunk := src.read(1 << 20):
                        out.write(chunk)
                os.fchmod(fd, mode | 0o400)
            finally:
                os.close(fd)
    finally:
        os.close(dir_fd)
