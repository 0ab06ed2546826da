"""Building real environment images inside a test: OCI layouts, ``docker save`` tarballs and
wheels, written byte by byte with correct sha256 digests (no registry, no network)."""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import tarfile
import zipfile
from collections.abc import Iterable
from functools import cache
from pathlib import Path

from proofgym.runtimes.sandbox import MinimalSystem

#: What ``Env`` a test image's config gives: the staged interpreter needs its library path.
IMAGE_ENV = ["PATH=/opt/python/bin:/usr/bin", "LD_LIBRARY_PATH=/opt/python/lib"]


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def entry(name: str, data: bytes = b"", *, kind: bytes = tarfile.REGTYPE, link: str = "",
          mode: int = 0o644, devmajor: int = 0) -> tuple[tarfile.TarInfo, bytes]:
    """One tar member (``kind``: a ``tarfile`` type) and its content."""
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode, info.devmajor = kind, link, mode, devmajor
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    return info, data


def layer_tar(entries: Iterable[tuple[tarfile.TarInfo, bytes]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in entries:
            tar.addfile(info, io.BytesIO(data) if info.type == tarfile.REGTYPE else None)
    return buf.getvalue()


@cache
def system_layer() -> bytes:
    """The staged minimal system (shell, core utilities, Python, pytest) as one layer tar, with
    the host's top-level links (``/lib64`` for the loader): an image that can host a sandbox."""
    root = MinimalSystem.default().root / "sys"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in ("bin", "lib", "lib64", "sbin"):
            link = Path("/") / name
            if link.is_symlink():
                info, _ = entry(name, kind=tarfile.SYMTYPE, link=str(link.readlink()))
                tar.addfile(info)
        for top in ("usr", "opt", "etc"):
            tar.add(root / top, arcname=top)
    return buf.getvalue()


def write_layout(dest: Path, layers: list[bytes], *, env: list[str] = IMAGE_ENV,
                 gzip_layers: Iterable[int] = (), ref: str | None = None) -> str:
    """An OCI image layout at ``dest`` holding one image of ``layers`` (bottom first; the
    indices in ``gzip_layers`` stored compressed). Returns the image's digest (its config's)."""
    blobs = dest / "blobs" / "sha256"
    blobs.mkdir(parents=True)

    def put(data: bytes) -> dict:
        digest = sha(data)
        (blobs / digest.split(":")[1]).write_bytes(data)
        return {"digest": digest, "size": len(data)}

    gz = set(gzip_layers)
    descs = [{"mediaType": "application/vnd.oci.image.layer.v1.tar" + ("+gzip" if i in gz else ""),
              **put(gzip.compress(raw, mtime=0) if i in gz else raw)} for i, raw in enumerate(layers)]
    config = json.dumps({"architecture": "amd64", "os": "linux", "config": {"Env": env},
                         "rootfs": {"type": "layers", "diff_ids": [sha(r) for r in layers]}}).encode()
    manifest = json.dumps({"schemaVersion": 2,
                           "mediaType": "application/vnd.oci.image.manifest.v1+json",
                           "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                      **put(config)}, "layers": descs}).encode()
    desc = {"mediaType": "application/vnd.oci.image.manifest.v1+json", **put(manifest)}
    if ref:
        desc["annotations"] = {"org.opencontainers.image.ref.name": ref}
    (dest / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    (dest / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [desc]}))
    return sha(config)


def write_docker_save(dest: Path, layers: list[bytes], *, env: list[str] = IMAGE_ENV,
                      tag: str = "tiny:latest") -> str:
    """A ``docker save`` tarball (the classic format: ``manifest.json``, ``<id>.json``,
    ``<n>/layer.tar``) at ``dest``. Returns the image's digest."""
    config = json.dumps({"architecture": "amd64", "os": "linux", "config": {"Env": env},
                         "rootfs": {"type": "layers", "diff_ids": [sha(r) for r in layers]}}).encode()
    cid = sha(config).split(":")[1]
    members = [(f"{cid}.json", config)]
    members += [(f"{i}/layer.tar", raw) for i, raw in enumerate(layers)]
    members.append(("manifest.json", json.dumps([{"Config": f"{cid}.json", "RepoTags": [tag],
                                                  "Layers": [f"{i}/layer.tar"
                                                             for i in range(len(layers))]}]).encode()))
    dest.write_bytes(layer_tar(entry(name, data) for name, data in members))
    return sha(config)


def release_layer(text: str) -> bytes:
    """A small layer on top: ``/etc/image-release`` says which image the sandbox runs on."""
    return layer_tar([entry("etc/", kind=tarfile.DIRTYPE, mode=0o755),
                      entry("etc/image-release", text.encode())])


def write_wheel(dest: Path, name: str, version: str, files: dict[str, str]) -> Path:
    """A pure-Python wheel ``name-version-py3-none-any.whl`` in ``dest`` with ``files``."""
    dist = f"{name}-{version}.dist-info"
    contents = {**files,
                f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
                f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: proofgym-tests\n"
                                 "Root-Is-Purelib: true\nTag: py3-none-any\n"}
    record = []
    for path, text in contents.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(text.encode())}")
    record.append(f"{dist}/RECORD,,")
    contents[f"{dist}/RECORD"] = "\n".join(record) + "\n"
    dest.mkdir(parents=True, exist_ok=True)
    wheel = dest / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, text in contents.items():
            zf.writestr(path, text)
    return wheel
