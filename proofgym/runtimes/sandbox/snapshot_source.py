"""Task snapshots from memory: a mapping of files, or a ``.tar``/``.tar.gz``/``.zip`` archive, made
into a read-only directory a sandbox can mount.

A sandbox's workspace is an overlay over a directory, so a snapshot given as data is written out
once, into a content-addressed cache (``<cache>/<sha256 of the content>``), and the same content
later maps to the same directory without writing it again. The directory appears by an atomic
rename of a fully written private temporary directory, so concurrent writers (threads or
processes) never see, or leave, a half-written snapshot.

Untrusted archives and mappings cannot write outside the cache: every name is checked before
anything is written (no absolute names, no ``..``, no NUL, no ``.`` prefix tricks), archive
members that are links, devices or FIFOs are refused, nothing is ever written through a symbolic
link (the temporary tree is created by us and files are opened with ``O_NOFOLLOW | O_EXCL``), and
the total size is bounded.
"""

from __future__ import annotations

import errno
import hashlib
import io
import os
import shutil
import stat
import tarfile
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import TypeAlias

from proofgym.core.errors import SnapshotSourceError as SnapshotSourceError
from proofgym.runtimes.private_dirs import check_private, override_dir, state_dir

#: What a snapshot may be given as: a directory, an archive (path or bytes), or a mapping of
#: workspace-relative paths to file contents (``str`` is written as UTF-8).
SnapshotSource: TypeAlias = str | Path | bytes | Mapping[str, bytes | str]

#: Archives and mappings larger than this (content bytes in all) are refused.
MAX_SNAPSHOT_BYTES = 512 << 20
MAX_SNAPSHOT_FILES = 100_000
#: Longest name of a snapshot entry (bytes, all of it and per component): Linux holds 255 per
#: component and 4096 per path, and the cache directory's own path comes in front.
MAX_NAME_BYTES, MAX_COMPONENT_BYTES = 3072, 255
_ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".zip")


def default_cache_dir() -> Path:
    """``$PROOFGYM_SNAPSHOT_CACHE``, else ``snapshots/`` of the user's private state (see
    :mod:`proofgym.runtimes.private_dirs`); either is refused if another user could change it."""
    return override_dir("PROOFGYM_SNAPSHOT_CACHE") or state_dir("snapshots")


def materialize(source: SnapshotSource, *, cache_dir: str | Path | None = None,
                max_bytes: int = MAX_SNAPSHOT_BYTES) -> Path:
    """The directory holding ``source``'s files.

    A directory is returned as it is (resolved). A mapping, an archive file (``.tar``,
    ``.tar.gz``/``.tgz``, ``.zip``) or archive bytes is written once into the cache and the cached
    directory is returned; the same content returns the same directory.

    Raises:
        SnapshotSourceError: the source is not one of these, names a path outside the snapshot,
            holds a link or special file, or is larger than ``max_bytes``.
    """
    if isinstance(source, (str, Path)):
        path = Path(source)
        if path.is_dir():
            return path.resolve()
        if not path.exists():
            raise SnapshotSourceError(f"snapshot {path} does not exist (give a directory, a "
                                      ".tar/.tar.gz/.zip archive, or a mapping of paths to contents)")
        if not path.name.endswith(_ARCHIVE_SUFFIXES):
            raise SnapshotSourceError(f"snapshot {path} is a file but not an archive; give a "
                                      f"directory or a file ending in {', '.join(_ARCHIVE_SUFFIXES)}")
        files, dirs = _read_archive(path.read_bytes(), str(path), max_bytes)
    elif isinstance(source, (bytes, bytearray, memoryview)):
        files, dirs = _read_archive(bytes(source), "snapshot bytes", max_bytes)
    elif isinstance(source, Mapping):
        files, dirs = _read_mapping(source, max_bytes)
    else:
        raise SnapshotSourceError(f"a snapshot is a directory, an archive or a mapping of paths to "
                                  f"contents; got {type(source).__name__}")
    return _store(files, dirs, Path(cache_dir) if cache_dir is not None else default_cache_dir())


# ------------------------------------------------------------------------------------ reading
def _clean_name(name: str, where: str) -> str:
    """``name`` as a normal relative POSIX path, or an error saying why it is unsafe."""
    if not name or "\x00" in name or "\\" in name:
        raise SnapshotSourceError(f"{where}: unsafe file name {name!r} (empty, NUL or backslash)")
    p = PurePosixPath(name)
    if p.is_absolute():
        raise SnapshotSourceError(f"{where}: absolute file name {name!r}; snapshot names are relative")
    parts = [part for part in p.parts if part != "."]
    if not parts:
        return ""  # the archive's root directory itself ("." or "./")
    if ".." in parts:
        raise SnapshotSourceError(f"{where}: file name {name!r} leaves the snapshot (uses ..)")
    clean = "/".join(parts)
    longest = max(len(part.encode("utf-8", "surrogateescape")) for part in parts)
    if longest > MAX_COMPONENT_BYTES or len(clean.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:
        raise SnapshotSourceError(f"{where}: file name {name[:80]!r}... is too long (at most "
                                  f"{MAX_COMPONENT_BYTES} bytes per component and "
                                  f"{MAX_NAME_BYTES} in all)")
    return clean


Tree = tuple[dict[str, tuple[bytes, bool]], set[str]]  # file -> (content, executable); dirs


def _read_mapping(source: Mapping[str, bytes | str], max_bytes: int) -> Tree:
    files: dict[str, tuple[bytes, bool]] = {}
    total = 0
    for name, content in source.items():
        if not isinstance(name, str):
            raise SnapshotSourceError(f"snapshot mapping: key {name!r} is not a str path")
        clean = _clean_name(name, "snapshot mapping")
        if isinstance(content, str):
            content = content.encode("utf-8")
        if not isinstance(content, (bytes, bytearray)):
            raise SnapshotSourceError(f"snapshot mapping: {name!r} maps to {type(content).__name__}; "
                                      "contents are bytes or str")
        total += len(content)
        if total > max_bytes:
            raise SnapshotSourceError(f"snapshot mapping holds more than {max_bytes} bytes")
        if clean in files:
            raise SnapshotSourceError(f"snapshot mapping: {name!r} names the same file as another key")
        files[clean] = (bytes(content), False)
        _check_count(files, set(), "snapshot mapping")
    return _checked(files, set(), "snapshot mapping")


def _read_archive(data: bytes, where: str, max_bytes: int) -> Tree:
    if data[:4] == b"PK\x03\x04" or data[:4] == b"PK\x05\x06":
        return _read_zip(data, where, max_bytes)
    try:
        archive = tarfile.open(fileobj=io.BytesIO(data), mode="r:*")  # noqa: SIM115 - closed below
    except tarfile.TarError as exc:
        raise SnapshotSourceError(f"{where}: not a tar, tar.gz or zip archive ({exc})") from None
    files: dict[str, tuple[bytes, bool]] = {}
    dirs: set[str] = set()
    total = 0
    with archive:
        for member in archive:
            name = _clean_name(member.name, where)
            if member.isdir():
                if name:
                    dirs.add(name)
                    _check_count(files, dirs, where)
                continue
            if not member.isreg():
                kind = "link" if member.issym() or member.islnk() else "special file"
                raise SnapshotSourceError(f"{where}: member {member.name!r} is a {kind}; snapshots "
                                          "hold regular files and directories only")
            total += member.size
            if total > max_bytes or len(files) >= MAX_SNAPSHOT_FILES:
                raise SnapshotSourceError(f"{where}: more than {max_bytes} bytes or "
                                          f"{MAX_SNAPSHOT_FILES} files")
            extracted = archive.extractfile(member)
            assert extracted is not None  # a regular member always has data
            files[name] = (extracted.read(member.size), bool(member.mode & 0o111))
    return _checked(files, dirs, where)


def _read_zip(data: bytes, where: str, max_bytes: int) -> Tree:
    files: dict[str, tuple[bytes, bool]] = {}
    dirs: set[str] = set()
    total = 0
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as exc:
        raise SnapshotSourceError(f"{where}: not a valid zip archive ({exc})") from None
    with archive:
        for info in archive.infolist():
            name = _clean_name(info.filename, where)
            mode = info.external_attr >> 16
            if info.is_dir():
                if name:
                    dirs.add(name)
                    _check_count(files, dirs, where)
                continue
            if stat.S_IFMT(mode) and not stat.S_ISREG(mode):  # no type bits: a plain file
                raise SnapshotSourceError(f"{where}: member {info.filename!r} is a link or special "
                                          "file; snapshots hold regular files and directories only")
            total += info.file_size
            if total > max_bytes or len(files) >= MAX_SNAPSHOT_FILES:
                raise SnapshotSourceError(f"{where}: more than {max_bytes} bytes or "
                                          f"{MAX_SNAPSHOT_FILES} files")
            with archive.open(info) as f:
                content = f.read(info.file_size + 1)  # a lying size header cannot inflate past it
            if len(content) != info.file_size:
                raise SnapshotSourceError(f"{where}: member {info.filename!r} is not the size its "
                                          "header says")
            files[name] = (content, bool(mode & 0o111))
    return _checked(files, dirs, where)


def _checked(files: dict[str, tuple[bytes, bool]], dirs: set[str], where: str) -> Tree:
    """Refuse a tree in which a file is also a directory (``a`` and ``a/b`` both files)."""
    if "" in files:
        raise SnapshotSourceError(f"{where}: a file named like the snapshot's root ('.')")
    for name in files:
        for parent in PurePosixPath(name).parents:
            if str(parent) in files:
                raise SnapshotSourceError(f"{where}: {name!r} lies under {str(parent)!r}, which is a file")
            if str(parent) != ".":
                dirs.add(str(parent))
    clash = dirs & files.keys()
    if clash:
        raise SnapshotSourceError(f"{where}: {sorted(clash)[0]!r} is both a file and a directory")
    _check_count(files, dirs, where)
    return files, dirs


def _check_count(files: Mapping[str, object], dirs: set[str], where: str) -> None:
    """Empty files and directories hold no bytes: the size bound alone never stops them."""
    if len(files) + len(dirs) > MAX_SNAPSHOT_FILES:
        raise SnapshotSourceError(f"{where}: more than {MAX_SNAPSHOT_FILES} files and directories")


# ------------------------------------------------------------------------------------ writing
def _digest(files: Mapping[str, tuple[bytes, bool]], dirs: set[str]) -> str:
    h = hashlib.sha256(b"proofgym snapshot 1\n")
    for name in sorted(files):
        content, executable = files[name]
        h.update(b"f%d %s\0%d\n" % (executable, name.encode("utf-8", "surrogateescape"), len(content)))
        h.update(content)
    for name in sorted(dirs):
        h.update(b"d %s\0\n" % name.encode("utf-8", "surrogateescape"))
    return h.hexdigest()


def _cache_root(cache: Path) -> Path:
    cache.mkdir(mode=0o755, parents=True, exist_ok=True)
    return check_private(cache, "the snapshot cache")


def _store(files: Mapping[str, tuple[bytes, bool]], dirs: set[str], cache: Path) -> Path:
    cache = _cache_root(cache)
    target = cache / _digest(files, dirs)
    if target.is_dir():
        return target
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=cache))
    try:
        os.chmod(tmp, 0o755)  # the sandbox's unprivileged uid reads it
        for name in sorted(dirs, key=lambda d: d.count("/")):
            os.mkdir(tmp / name)
            os.chmod(tmp / name, 0o755)  # explicit: a umask of 077 would hide it from the sandbox
        for name, (content, executable) in files.items():
            fd = os.open(tmp / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as f:
                os.fchmod(f.fileno(), 0o755 if executable else 0o644)
                f.write(content)
        try:
            os.rename(tmp, target)  # atomic: the snapshot appears whole or not at all
        except OSError:
            if not target.is_dir():
                raise
            shutil.rmtree(tmp)  # another writer stored the same content first
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OSError) and exc.errno == errno.ENAMETOOLONG:  # under a long cache path
            raise SnapshotSourceError(f"a snapshot file name is too long to store under the cache "
                                      f"{cache}: {exc.filename}; use a shorter "
                                      "PROOFGYM_SNAPSHOT_CACHE") from None
        raise
    return target
