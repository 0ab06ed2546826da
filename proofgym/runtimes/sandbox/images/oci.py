"""An OCI image as a sandbox's system: an image layout directory (``oci-layout``,
``index.json``, ``blobs/sha256/...``) or a ``docker save``/``podman save`` tarball.

Every blob read is checked against its digest (the manifest's and config's names, each
layer's compressed digest where the manifest gives one, and each layer's uncompressed
``diff_id`` from the config). Each layer is unpacked once (:mod:`.layers`) into the cache as
``layers/<diff id>.<root|user>`` (whiteouts and opaque marks differ with and without root) and
the layers are mounted, read-only, as the lower layers of one overlay in the sandbox's own
mount namespace; the sandbox's ``/`` holds the image's top-level entries, with ``/proc``
(masked as on the minimal system), ``/dev``, a private ``/tmp`` and ``/workspace`` as always.

The image's interpreter (``python``, default ``python3`` found on the image's ``PATH``) runs
the sandbox's supervisor and the grading runner, so an image needs a Python 3. Of the config
only ``Env`` is used (``PATH`` as the sandbox's, the others but ``HOME``, ``USER``, ``LANG`` and
the like too); ``User``, ``WorkingDir`` and ``Entrypoint`` are not (the sandbox's uid and
``/workspace`` are proofgym's).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from proofgym.runtimes.sandbox.images.cache import build_once, cache_root, mount_root, write_record
from proofgym.runtimes.sandbox.images.layers import LayerError, unpack_layer
from proofgym.runtimes.sandbox.images.lookup import find_program
from proofgym.runtimes.sandbox.images.packages import ImageError, Progress

__all__ = ["OciImage"]

_INDEX_TYPES = ("application/vnd.oci.image.index.v1+json",
                "application/vnd.docker.distribution.manifest.list.v2+json")
_REF_KEYS = ("org.opencontainers.image.ref.name", "io.containerd.image.name")
#: Top-level names the sandbox provides itself, never taken from an image.
_OWN = frozenset({"proc", "dev", "tmp", "sys", "workspace"})
#: Variables of the sandbox's own that an image's ``Env`` does not change.
_RESERVED = frozenset({"HOME", "USER", "LOGNAME", "LANG", "TERM", "PYTHONDONTWRITEBYTECODE",
                       "PYTEST_DISABLE_PLUGIN_AUTOLOAD", "PYTHONUNBUFFERED"})
_DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class _Source:
    """The files of an image layout directory or a saved tarball, by relative path."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tar: tarfile.TarFile | None = None
        self.members: dict[str, tarfile.TarInfo] = {}
        if path.is_file():
            try:
                self.tar = tarfile.open(path)  # noqa: SIM115 - kept open for the image's reads
            except tarfile.TarError as exc:
                raise ImageError(f"{path} is not a tar archive ({exc}); pass an OCI image layout "
                                 "directory or a `docker save`/`podman save` tarball") from None
            self.members = {m.name.removeprefix("./"): m for m in self.tar.getmembers() if m.isfile()}
        elif not path.is_dir():
            raise ImageError(f"image {path} does not exist (an OCI layout directory or a saved "
                             "tarball)")

    def exists(self, name: str) -> bool:
        return name in self.members if self.tar else (self.path / name).is_file()

    def open(self, name: str) -> IO[bytes]:
        if ".." in name.split("/") or name.startswith("/"):
            raise ImageError(f"the image names a blob {name!r} outside itself")
        if self.tar is not None:
            if name not in self.members:
                raise ImageError(f"{self.path} has no {name}")
            f = self.tar.extractfile(self.members[name])
            assert f is not None
            return f
        try:
            return open(self.path / name, "rb")
        except FileNotFoundError:
            raise ImageError(f"{self.path} has no {name}") from None

    def read(self, name: str, digest: str | None = None) -> bytes:
        with self.open(name) as f:
            data = f.read()
        if digest is not None and _sha(data) != digest:
            raise ImageError(f"{self.path}: {name} does not match its digest {digest} (the "
                             "image is corrupt or was tampered with)")
        return data

    def json(self, name: str, digest: str | None = None) -> Any:
        try:
            return json.loads(self.read(name, digest))
        except ValueError as exc:
            raise ImageError(f"{self.path}: {name} is not JSON ({exc})") from None


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _blob(digest: str) -> str:
    alg, _, hexd = str(digest).partition(":")
    if alg != "sha256" or len(hexd) != 64 or not all(c in "0123456789abcdef" for c in hexd):
        raise ImageError(f"unsupported or malformed digest {digest!r} (sha256 only)")
    return f"blobs/sha256/{hexd}"


def _choose(items: list[Any], ref: str | None, names: Any, what: str) -> Any:
    if ref is None:
        if len(items) != 1:
            raise ImageError(f"{what} holds {len(items)} images; pick one with ref= (one of "
                             f"{sorted(n for i in items for n in names(i))})")
        return items[0]
    for item in items:
        if ref in names(item):
            return item
    raise ImageError(f"{what} has no image {ref!r}; it has {sorted(n for i in items for n in names(i))}")


def _read_image(src: _Source, ref: str | None) -> tuple[bytes, list[tuple[str, str | None]]]:
    """The config's bytes and ``(blob path, compressed digest or None)`` per layer."""
    if src.exists("oci-layout") and src.exists("index.json"):
        index = src.json("index.json")
        desc = _choose(list(index.get("manifests", [])), ref,
                       lambda d: [v for k, v in (d.get("annotations") or {}).items() if k in _REF_KEYS],
                       f"{src.path}/index.json")
        manifest = src.json(_blob(desc["digest"]), desc["digest"])
        while manifest.get("mediaType") in _INDEX_TYPES or "manifests" in manifest:
            subs = [m for m in manifest["manifests"]
                    if (m.get("platform") or {}).get("architecture") in (None, "amd64")
                    and (m.get("platform") or {}).get("os") in (None, "linux")]
            if not subs:
                raise ImageError(f"{src.path}: no linux/amd64 image in its index")
            manifest = src.json(_blob(subs[0]["digest"]), subs[0]["digest"])
        cfg = manifest["config"]["digest"]
        return (src.read(_blob(cfg), cfg),
                [(_blob(layer["digest"]), layer["digest"]) for layer in manifest["layers"]])
    if src.exists("manifest.json"):
        entries = src.json("manifest.json")
        if not isinstance(entries, list):
            raise ImageError(f"{src.path}: manifest.json is not a `docker save` manifest list")
        entry = _choose(entries, ref, lambda e: e.get("RepoTags") or [], f"{src.path}")
        config = src.read(entry["Config"])
        stated = entry["Config"].removeprefix("blobs/sha256/").removesuffix(".json")
        if len(stated) == 64 and _sha(config) != f"sha256:{stated}":
            raise ImageError(f"{src.path}: {entry['Config']} does not match its digest")
        return config, [(p, "sha256:" + p.removeprefix("blobs/sha256/")
                         if p.startswith("blobs/sha256/") else None) for p in entry["Layers"]]
    raise ImageError(f"{src.path} is neither an OCI image layout (oci-layout, index.json) nor a "
                     "`docker save` archive (manifest.json)")


@dataclass(frozen=True)
class OciImage:
    """An OCI image at ``source`` (layout directory or saved tarball), ``ref`` picking one of
    several images in it, ``python`` the image's interpreter (a path, or a name on its PATH).

    Constructing reads and checks the manifest and config (``digest`` is the image id: the
    sha256 of the config, which names every layer); :meth:`build` unpacks the layers once into
    the cache and returns the image ready to boot.
    """

    source: str
    ref: str | None = None
    python: str = "python3"
    digest: str = field(default="", init=False)
    config: Mapping[str, Any] = field(default_factory=dict, init=False, compare=False, repr=False)
    layers: tuple[tuple[str, str | None, str], ...] = field(default=(), init=False, compare=False,
                                                            repr=False)
    root: Path | None = field(default=None, compare=False, repr=False)
    entries: tuple[tuple[str, str | None], ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        src = _Source(Path(self.source))
        config_bytes, blobs = _read_image(src, self.ref)
        try:
            config = json.loads(config_bytes)
            diff_ids = list(config["rootfs"]["diff_ids"])
        except (ValueError, KeyError, TypeError):
            raise ImageError(f"{self.source}: the image config has no rootfs.diff_ids") from None
        if len(diff_ids) != len(blobs):
            raise ImageError(f"{self.source}: the manifest lists {len(blobs)} layers, the config "
                             f"{len(diff_ids)}")
        object.__setattr__(self, "digest", _sha(config_bytes))
        object.__setattr__(self, "config", config)
        layers = tuple((p, d, i) for (p, d), i in zip(blobs, diff_ids, strict=True))
        object.__setattr__(self, "layers", layers)

    def build(self, progress: Progress | None = None) -> OciImage:
        """The image with every layer unpacked (each once per cache) and its mount root made."""
        if self.root is not None:
            return self
        src = _Source(Path(self.source))
        mode = "root" if os.geteuid() == 0 else "user"
        dirs = []
        for n, (path, digest, diff_id) in enumerate(self.layers, 1):
            _blob(diff_id)
            dest = cache_root() / "layers" / f"{diff_id.split(':', 1)[1]}.{mode}"
            if progress:
                state = "cached" if dest.exists() else "unpacking"
                progress(f"layer {n}/{len(self.layers)} {diff_id[:19]}: {state}")
            dirs.append(build_once(dest, lambda tmp, p=path, d=digest, i=diff_id:
                                   _unpack(src, p, d, i, tmp, progress)))
        hexd = self.digest.split(":", 1)[1]
        root = mount_root(hexd[:20], list(reversed(dirs)))  # overlay: topmost first
        write_record(f"oci-{hexd[:20]}", {"kind": "oci", "digest": self.digest,
                                          "source": str(Path(self.source).resolve()),
                                          "ref": self.ref, "layers": len(dirs)})
        built = OciImage(self.source, self.ref, self.python, root=root,
                         entries=tuple(sorted(_top_level(dirs).items())))
        if progress:
            progress(f"ready: {self.digest}")
        return built

    def check(self) -> None:
        """Raise :class:`ImageError` unless the image has its interpreter (``python``, a path or
        a name on the image's ``PATH``): the sandbox's supervisor runs on it."""
        if self.root is None:
            raise ImageError("this OciImage is not built yet: call image = image.build()")
        names = (self.root / "lowerdir").read_text().strip().split(":")
        layers = [Path(os.path.realpath(self.root / n)) for n in names if n != "empty"]
        if find_program(layers, self.python, self.path) is None:
            raise ImageError(f"image {self.source}: no {self.python!r} on its PATH ({self.path}); "
                             "a sandbox's supervisor and grading runner run on the image's Python "
                             "3: pass python= its path in the image, or use an image with one")

    # ------------------------------------------------------------- SandboxSystem
    def bwrap_args(self) -> list[str]:
        if self.root is None:
            raise ImageError("this OciImage is not built yet: call image = image.build()")
        args = []
        for name, link in self.entries:
            if name in _OWN:
                continue
            if link is not None:
                args += ["--symlink", link, f"/{name}"]
            else:
                args += ["--ro-bind", str(self.root / "sys" / name), f"/{name}"]
        return args

    @property
    def path(self) -> str:
        for item in (self.config.get("config") or {}).get("Env") or []:
            if isinstance(item, str) and item.startswith("PATH="):
                return item[5:]
        return _DEFAULT_PATH

    @property
    def env(self) -> Mapping[str, str]:
        """The config's ``Env`` but ``PATH`` (:attr:`path`) and the variables the sandbox sets
        itself (``HOME``, ``USER``, ...: :data:`_RESERVED`)."""
        out = {}
        for item in (self.config.get("config") or {}).get("Env") or []:
            name, sep, value = str(item).partition("=")
            if sep and name and name != "PATH" and name not in _RESERVED:
                out[name] = value
        return out

    @property
    def host_python(self) -> bool:
        return False

    def describe(self) -> dict[str, Any]:
        return {"kind": "oci", "digest": self.digest, "python": self.python,
                "layers": [i for _, _, i in self.layers]}


def _unpack(src: _Source, path: str, digest: str | None, diff_id: str, tmp: Path,
            progress: Progress | None) -> None:
    def report(done: int) -> None:
        if progress is not None:
            progress(f"  {done >> 20} MiB of {path} unpacked")

    with src.open(path) as stream:
        try:
            got, got_diff = unpack_layer(stream, tmp, report)
        except LayerError as exc:
            raise ImageError(f"{src.path}: layer {path}: {exc}") from None
    if digest is not None and got != digest:
        raise ImageError(f"{src.path}: layer {path} does not match its digest {digest} (got {got})")
    if got_diff != diff_id:
        raise ImageError(f"{src.path}: layer {path} unpacks to {got_diff}, not the config's "
                         f"diff_id {diff_id}")


def _top_level(dirs: list[Path]) -> dict[str, str | None]:
    """The merged image's top-level names (``None`` for a directory or file, the target for
    a symbolic link), from the layers bottom first, as the overlay will show them."""
    entries: dict[str, str | None] = {}
    for layer in dirs:
        try:
            if os.getxattr(layer, "user.overlay.opaque") == b"y":
                entries.clear()
        except OSError:
            pass
        for e in os.scandir(layer):
            if e.name.startswith(".proofgym-"):
                continue
            st = e.stat(follow_symlinks=False)
            if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:
                entries.pop(e.name, None)
            elif stat.S_ISLNK(st.st_mode):
                entries[e.name] = os.readlink(e.path)
            else:
                entries[e.name] = None
    return entries
