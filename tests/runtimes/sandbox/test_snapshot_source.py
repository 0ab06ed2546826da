"""Snapshots from memory: mappings and archives written once into a content-addressed cache,
and never anywhere else, whatever the archive says."""

from __future__ import annotations

import io
import os
import tarfile
import threading
import zipfile
from pathlib import Path

import pytest

from proofgym.core import ProofgymError
from proofgym.runtimes.private_dirs import UnsafeStateDirError
from proofgym.runtimes.sandbox import SandboxRuntime, SnapshotSourceError, materialize
from tests.conftest import require_tool
from tests.sandbox_helpers import FAST_LIMITS


def tar_bytes(members: list[tuple[tarfile.TarInfo, bytes | None]], mode: str = "w:gz") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def member(name: str, kind: bytes = tarfile.REGTYPE, linkname: str = "",
           mode: int = 0o644) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = kind, linkname, mode
    return info


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_mapping_is_written_once_and_reused(tmp_path: Path) -> None:
    files = {"src/app.py": "print('hi')\n", "data.bin": b"\x00\x01", "./docs/../README.md": "x"}
    with pytest.raises(SnapshotSourceError, match=r"\.\."):
        materialize(files, cache_dir=tmp_path)  # ".." is refused even when it stays inside
    del files["./docs/../README.md"]
    first = materialize(files, cache_dir=tmp_path)
    assert tree(first) == {"data.bin": b"\x00\x01", "src/app.py": b"print('hi')\n"}
    assert first.parent == tmp_path and len(first.name) == 64
    mtime = first.stat().st_mtime_ns
    again = materialize(dict(reversed(list(files.items()))), cache_dir=tmp_path)
    assert again == first and again.stat().st_mtime_ns == mtime  # same content, same directory
    other = materialize({**files, "data.bin": b"\x00\x02"}, cache_dir=tmp_path)
    assert other != first
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]


def test_the_snapshot_is_readable_by_others_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        root = materialize({"pkg/mod.py": "X = 1\n"}, cache_dir=tmp_path / "c")
    finally:
        os.umask(old)
    assert (root / "pkg").stat().st_mode & 0o777 == 0o755
    assert (root / "pkg" / "mod.py").stat().st_mode & 0o777 == 0o644
    assert root.stat().st_mode & 0o777 == 0o755


def test_a_directory_is_used_as_it_is(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    assert materialize(tmp_path / "d", cache_dir=tmp_path / "c") == (tmp_path / "d").resolve()
    assert not (tmp_path / "c").exists()


def test_tar_gz_zip_and_bytes_give_the_same_tree(tmp_path: Path) -> None:
    data = {"pkg/__init__.py": b"X = 1\n", "run.sh": b"#!/bin/sh\necho ok\n"}
    tgz = tar_bytes([(member("./", tarfile.DIRTYPE, mode=0o755), None),
                     (member("./pkg/__init__.py"), data["pkg/__init__.py"]),
                     (member("./run.sh", mode=0o755), data["run.sh"]),
                     (member("empty", tarfile.DIRTYPE, mode=0o755), None)])
    (tmp_path / "s.tar.gz").write_bytes(tgz)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, content in data.items():
            z.writestr(name, content)
    (tmp_path / "s.zip").write_bytes(buf.getvalue())
    cache = tmp_path / "cache"
    from_tgz = materialize(tmp_path / "s.tar.gz", cache_dir=cache)
    assert tree(from_tgz) == data and (from_tgz / "empty").is_dir()
    assert os.access(from_tgz / "run.sh", os.X_OK) and not os.access(from_tgz / "pkg/__init__.py", os.X_OK)
    assert materialize(tgz, cache_dir=cache) == from_tgz
    assert tree(materialize(str(tmp_path / "s.zip"), cache_dir=cache)) == data
    assert tree(materialize(buf.getvalue(), cache_dir=cache)) == data


@pytest.mark.parametrize("members, why", [
    ([(member("../escape.txt"), b"pwned")], r"\.\."),
    ([(member("a/../../escape.txt"), b"pwned")], r"\.\."),
    ([(member("/tmp/abs-escape.txt"), b"pwned")], "absolute"),
    ([(member("link", tarfile.SYMTYPE, linkname="/"), None), (member("link/escape.txt"), b"pwned")],
     "link"),
    ([(member("hard", tarfile.LNKTYPE, linkname="/etc/passwd"), None)], "link"),
    ([(member("dev", tarfile.CHRTYPE), None)], "special"),
    ([(member("a"), b"file"), (member("a/b"), b"under a file")], "lies under"),
])
def test_a_malicious_tar_writes_nothing_outside_the_cache(tmp_path: Path, members, why) -> None:
    cache = tmp_path / "deep" / "cache"
    with pytest.raises(SnapshotSourceError, match=why) as caught:
        materialize(tar_bytes(members), cache_dir=cache)
    assert isinstance(caught.value, ProofgymError)
    assert not (tmp_path / "deep" / "escape.txt").exists() and not (tmp_path / "escape.txt").exists()
    assert not Path("/tmp/abs-escape.txt").exists() and not Path("/escape.txt").exists()
    assert not cache.exists() or list(cache.iterdir()) == []  # nothing half-written left either


def test_a_malicious_zip_or_mapping_is_refused(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("../../escape.txt", b"pwned")
    with pytest.raises(SnapshotSourceError, match=r"\.\."):
        materialize(buf.getvalue(), cache_dir=tmp_path / "c")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        info = zipfile.ZipInfo("link")
        info.external_attr = (0o120777 << 16)  # a symlink entry
        z.writestr(info, "/etc")
    with pytest.raises(SnapshotSourceError, match="link"):
        materialize(buf.getvalue(), cache_dir=tmp_path / "c")
    for bad in ({"/etc/cron.d/x": "pwned"}, {"a\x00b": "x"}, {".": "x"}, {"x": 3}):
        with pytest.raises(SnapshotSourceError):
            materialize(bad, cache_dir=tmp_path / "c")
    with pytest.raises(SnapshotSourceError, match="more than 10 bytes"):
        materialize({"big": b"x" * 11}, cache_dir=tmp_path / "c", max_bytes=10)
    assert not (tmp_path / "escape.txt").exists()


def test_a_cache_reached_through_a_directory_others_can_write_is_refused(tmp_path: Path) -> None:
    """Another user could swap the link (or the directory) for theirs: refused, nothing written."""
    (tmp_path / "elsewhere").mkdir()
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    (shared / "cache").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UnsafeStateDirError, match="shared is writable by others"):
        materialize({"a": "b"}, cache_dir=shared / "cache")
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_concurrent_writers_of_the_same_content_agree(tmp_path: Path) -> None:
    files = {f"f{i}.txt": f"{i}\n" * 1000 for i in range(200)}
    results: list[Path] = []
    errors: list[BaseException] = []

    def write() -> None:
        try:
            results.append(materialize(files, cache_dir=tmp_path))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(set(results)) == 1 and len(results) == 8
    assert tree(results[0]) == {k: v.encode() for k, v in files.items()}
    assert [p.name for p in tmp_path.iterdir()] == [results[0].name]  # no temporary left


def test_a_sandbox_runs_over_a_snapshot_from_memory(tmp_path: Path, monkeypatch) -> None:
    require_tool("bwrap")
    monkeypatch.setenv("PROOFGYM_SNAPSHOT_CACHE", str(tmp_path / "cache"))
    with SandboxRuntime({"hello.py": "print('from memory')\n"}, limits=FAST_LIMITS) as rt:
        assert rt.execute("bash", {"command": "python hello.py"}).output.strip() == "from memory"
        rt.use_snapshot(tar_bytes([(member("other.txt"), b"from a tar\n")]))
        assert rt.execute("read_file", {"path": "other.txt"}).output == "from a tar\n"
        assert not rt.execute("read_file", {"path": "hello.py"}).ok
        with pytest.raises(SnapshotSourceError, match="does not exist"):
            rt.use_snapshot(tmp_path / "missing")
