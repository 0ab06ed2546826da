"""Fetching a project's sdist from PyPI at a pinned version, checked against its sha256, cached.

The cache (``$PROOFGYM_CACHE``, else the user's private state root: ``/var/cache/proofgym`` as
root, ``$XDG_CACHE_HOME/proofgym`` or ``~/.cache/proofgym`` otherwise; refused if another user
could write it, see :mod:`proofgym.runtimes.private_dirs`) holds each sdist once, under its
hash; an unpacked tree lives next to it. Nothing here is ever mounted into a sandbox: the
pristine source stays on the host (see ``docs/real-repositories.md``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sys
import tarfile
import tempfile
import urllib.parse
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

import httpx

from proofgym.core.errors import FetchError as FetchError
from proofgym.core.tls import tls_context
from proofgym.runtimes.private_dirs import cache_home

#: The package index asked for sdists; ``$PROOFGYM_PYPI`` names another (a mirror), read at each call.
DEFAULT_INDEX = "https://pypi.org"


def index_url() -> str:
    return os.environ.get("PROOFGYM_PYPI") or DEFAULT_INDEX


def cache_dir() -> Path:
    """Where sdists, unpacked trees and task checkouts are cached."""
    return cache_home()


class Release(NamedTuple):
    """A release's sdist on the index."""

    url: str
    sha256: str
    yanked: bool = False


def index_releases(name: str) -> dict[str, Release | None]:
    """Every release of ``name`` the index lists: version -> its sdist (``None``: no sdist),
    from the JSON API."""
    api = f"{index_url()}/pypi/{name}/json"  # (some mirrors serve only the project-wide document)
    try:
        with _download(api, timeout_s=30) as (_, chunks):
            data = json.loads(b"".join(chunks))
    except (OSError, httpx.HTTPError, ValueError) as exc:
        raise FetchError(f"cannot read {api} ({exc}); check the network or set PROOFGYM_PYPI "
                         "to a reachable index") from exc
    out: dict[str, Release | None] = {}
    for version, files in (data.get("releases") or {}).items():
        out[version] = next((Release(urllib.parse.urljoin(api, e["url"]), e["digests"]["sha256"],
                                     bool(e.get("yanked")))
                             for e in files or () if e.get("packagetype") == "sdist"), None)
    return out


def sdist_url(name: str, version: str) -> tuple[str, str]:
    """The sdist URL of ``name==version`` on the index and its sha256 (from the JSON API)."""
    releases = index_releases(name)
    if version not in releases:
        raise FetchError(f"{name} has no version {version} on {index_url()}")
    found = releases[version]
    if found is None:
        raise FetchError(f"{name} {version} has no sdist on {index_url()}; pick a version that "
                         "ships one")
    return found.url, found.sha256


def _progress(label: str) -> Callable[[int, int], None]:
    def show(done: int, total: int) -> None:
        if total > 0:
            sys.stderr.write(f"\r  {label}: {done >> 10} / {total >> 10} KiB")
        else:
            sys.stderr.write(f"\r  {label}: {done >> 10} KiB")
        sys.stderr.flush()
    return show


def fetch_sdist(name: str, version: str, sha256: str, url: str | None = None, *,
                quiet: bool = False) -> Path:
    """The sdist of ``name==version``, downloaded once (with progress on stderr) and verified
    against ``sha256``; a cached file is re-verified on every call."""
    store = cache_dir() / "sdists"
    store.mkdir(parents=True, exist_ok=True)
    found = sorted(store.glob(f"{sha256}-*"))
    if found and _sha256(found[0]) == sha256:
        return found[0]
    if url is None:
        url, _ = sdist_url(name, version)
    filename = url.rsplit("/", 1)[-1]
    target = store / f"{sha256}-{filename}"
    if not quiet:
        sys.stderr.write(f"proofgym: fetching {name} {version} sdist from {url} (once; cached in "
                         f"{store})\n")
    show = _progress(filename) if not quiet else None
    fd, tmp = tempfile.mkstemp(dir=store, prefix=".part-")
    digest = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as out, _download(url, timeout_s=60) as (total, chunks):
            done = 0
            for chunk in chunks:
                out.write(chunk)
                digest.update(chunk)
                done += len(chunk)
                if show:
                    show(done, total)
        if show:
            sys.stderr.write("\n")
        if digest.hexdigest() != sha256:
            raise FetchError(f"{url}: sha256 {digest.hexdigest()} differs from the pinned "
                             f"{sha256}; the file on the index changed or the pin is wrong")
        os.replace(tmp, target)
    except (OSError, httpx.HTTPError) as exc:
        raise FetchError(f"cannot download {url} ({exc})") from exc
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


@contextlib.contextmanager
def _download(url: str, *, timeout_s: float) -> Iterator[tuple[int, Iterator[bytes]]]:
    """``url``'s size (0: unknown) and its bytes in chunks: over HTTP(S) with httpx, or read from
    disk for a ``file://`` URL (a local mirror, a release kept on disk)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "file":
        with open(urllib.parse.unquote(parts.path), "rb") as f:
            yield os.fstat(f.fileno()).st_size, iter(lambda: f.read(1 << 16), b"")
        return
    with httpx.stream("GET", url, timeout=timeout_s, follow_redirects=True,
                      verify=tls_context()) as resp:
        resp.raise_for_status()
        yield int(resp.headers.get("Content-Length") or 0), resp.iter_bytes(1 << 16)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def unpack(sdist: Path, into: Path) -> Path:
    """``sdist`` unpacked into ``into`` (once), its one top-level directory returned. Members
    that would land outside ``into`` (absolute paths, ``..``, links) are refused."""
    done = into / ".unpacked"
    if not done.exists():
        if into.exists():
            shutil.rmtree(into)
        into.mkdir(parents=True)
        if sdist.name.endswith(".zip"):
            with zipfile.ZipFile(sdist) as zf:
                for member in zf.namelist():
                    _check_member(member, sdist)
                zf.extractall(into)
        else:
            with tarfile.open(sdist) as tf:
                members = []
                for member in tf.getmembers():
                    _check_member(member.name, sdist)
                    if member.isfile() or member.isdir():
                        members.append(member)
                tf.extractall(into, members=members, filter="data")
        done.write_text(sdist.name)
    tops = [p for p in into.iterdir() if p.is_dir()]
    if len(tops) != 1:
        raise FetchError(f"{sdist.name}: expected one top-level directory, found {len(tops)}")
    return tops[0]


def _check_member(name: str, sdist: Path) -> None:
    parts = Path(name).parts
    if name.startswith("/") or ".." in parts:
        raise FetchError(f"{sdist.name}: member {name!r} would be written outside the unpack dir")
