"""Attack: a snapshot archive or mapping (a task set downloaded from elsewhere) that abuses
``materialize`` beyond the traversal and link tricks of ``tests/runtimes/sandbox/test_snapshot_source.py``.

* names the file system cannot hold (a component over 255 bytes, a path over 4096): a clear
  :class:`SnapshotSourceError`, not a bare ``OSError`` from half-way through writing;
* more entries than :data:`MAX_SNAPSHOT_FILES` as empty files in a mapping, or as directories in
  an archive (no content bytes: the size bound alone never stops them);
* setuid/setgid/sticky bits on archive members: never on a file the sandbox can run.
"""

from __future__ import annotations

import io
import stat
import tarfile
from pathlib import Path

import pytest

from proofgym.core.errors import ProofgymError
from proofgym.runtimes.sandbox import snapshot_source
from proofgym.runtimes.sandbox.snapshot_source import SnapshotSourceError, materialize


def _tar(members: list[tuple[str, bytes | None, int]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, content, mode in members:
            info = tarfile.TarInfo(name)
            info.mode = mode
            if content is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
    return buf.getvalue()


@pytest.mark.parametrize("name", ["a" * 256, "/".join(["d" * 200] * 25) + "/f"])
def test_a_name_the_file_system_cannot_hold_is_a_clear_error(tmp_path: Path, name: str) -> None:
    cache = tmp_path / "cache"
    for source in ({name: b"x"}, _tar([(name, b"x", 0o644)])):
        with pytest.raises(SnapshotSourceError, match="too long") as caught:
            materialize(source, cache_dir=cache)
        assert isinstance(caught.value, ProofgymError)
        assert not cache.exists() or [p for p in cache.iterdir()] == []  # nothing half-written


def test_entries_without_content_count_against_the_file_limit(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(snapshot_source, "MAX_SNAPSHOT_FILES", 50)
    cache = tmp_path / "cache"
    with pytest.raises(SnapshotSourceError, match="50"):
        materialize({f"empty{i}": b"" for i in range(51)}, cache_dir=cache)
    with pytest.raises(SnapshotSourceError, match="50"):
        materialize(_tar([(f"dir{i}", None, 0o755) for i in range(51)]), cache_dir=cache)
    with pytest.raises(SnapshotSourceError, match="50"):  # implied directories count too
        materialize({"/".join(["d"] * 60) + "/f": b"x"}, cache_dir=cache)
    assert not cache.exists() or [p for p in cache.iterdir()] == []
    deep = tmp_path.joinpath(*["c" * 250] * 6)  # a long cache path
    with pytest.raises(SnapshotSourceError, match="too long"):
        materialize({"/".join(["n" * 250] * 12): b"x"}, cache_dir=deep)
    assert materialize({f"empty{i}": b"" for i in range(50)}, cache_dir=cache).is_dir()


def test_setuid_setgid_and_sticky_bits_never_reach_the_snapshot(tmp_path: Path) -> None:
    root = materialize(_tar([("bin", None, 0o7777), ("bin/tool", b"#!/bin/sh\n", 0o6755),
                             ("data", b"x", 0o1666)]), cache_dir=tmp_path / "cache")
    for path in (root / "bin", root / "bin" / "tool", root / "data"):
        mode = path.stat().st_mode
        assert not mode & (stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX), (path, oct(mode))
        assert not mode & stat.S_IWOTH, (path, oct(mode))
