"""Attack: put host files, or more than the host can hold, into the artifact that is stored and
graded; or give files names that break the run record.

The snapshot is read with every process of the episode stopped, through directory descriptors
with ``O_NOFOLLOW``, within the artifact limits of ``SandboxLimits``; names are bytes end to end.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from proofgym.runtimes.artifact import Artifact
from proofgym.runtimes.sandbox import SandboxLimits, SandboxRuntime
from proofgym.runtimes.sandbox.changes import read_changes
from tests.conftest import require_tool
from tests.sandbox_helpers import FAST_LIMITS
from tests.security.conftest import bash

pytestmark = pytest.mark.sandbox

SECRET = b"host-secret-3b1f"


def test_a_background_swapper_cannot_put_host_files_in_the_artifact(rt):
    # a process left running swaps a directory for a link to a host-like path while snapshot()
    # walks the workspace; it must be dead before anything is read
    swap = ("nohup bash -c 'while :; do rm -rf d; mkdir d; echo x > d/f; rm -rf d; "
            "ln -s /opt/python d; done' >/dev/null 2>&1 & disown; sleep 0.2; echo started")
    bash(rt, swap)
    seen = [rt.snapshot() for _ in range(20)]
    for art in seen:
        assert all(p in ("d/f",) for p in art.files), sorted(art.files)[:5]
    assert seen[-1].files == seen[0].files  # nothing changed between snapshots: nothing runs


def test_read_changes_never_follows_a_link_swapped_in_mid_walk(tmp_path):
    """The walk itself, against a swapper running on the host side (no sandbox to stop it)."""
    upper, lower, host = tmp_path / "upper", tmp_path / "lower", tmp_path / "host"
    for d in (upper, lower, host):
        d.mkdir()
    (host / "secret.txt").write_bytes(SECRET)
    for i in range(50):
        (host / f"f{i}").write_bytes(SECRET)
    stop = threading.Event()

    def swapper() -> None:
        d = upper / "d"
        while not stop.is_set():
            try:
                d.mkdir()
                for i in range(50):
                    (d / f"f{i}").write_bytes(b"mine")
                for i in range(50):
                    (d / f"f{i}").unlink()
                d.rmdir()
                d.symlink_to(host)
                d.unlink()
            except OSError:
                continue

    t = threading.Thread(target=swapper)
    t.start()
    try:
        for _ in range(300):
            changes = read_changes(upper, lower)
            for path, content in changes.files.items():
                assert content != SECRET, f"{path} was read through a link to the host"
    finally:
        stop.set()
        t.join()


def test_links_are_recorded_never_followed(rt):
    bash(rt, "ln -s /opt/python/bin/python3 py; mkdir real; ln -s /opt real/dir; echo a > real/a")
    art = rt.snapshot()
    assert dict(art.files) == {"real/a": b"a\n"}
    assert sorted(art.meta["skipped"]) == ["py", "real/dir"]


def _runtime(tmp_path: Path, **limits: int) -> SandboxRuntime:
    require_tool("bwrap")
    fields = {**FAST_LIMITS.to_dict(), **limits}
    return SandboxRuntime(tmp_path, limits=SandboxLimits(**fields))


def test_an_artifact_over_the_byte_limit_holds_no_content(tmp_path):
    with _runtime(tmp_path, artifact_max_bytes=1 << 20) as rt:
        assert bash(rt, "head -c 600K /dev/zero > a; head -c 600K /dev/zero > b").ok
        art = rt.snapshot()
    assert "artifact_max_bytes" in art.meta["limit_exceeded"]
    assert art.files == {}
    assert Artifact.from_dict(json.loads(json.dumps(art.to_dict()))) == art


def test_sparse_files_count_at_their_apparent_size(tmp_path):
    # 8 x 16 MiB sparse files: almost no disk, 128 MiB apparent (more than the 32 MiB default)
    with _runtime(tmp_path) as rt:
        r = bash(rt, "python -c \"\nfor i in range(8):\n    open(f's{i}', 'wb').truncate(16 << 20)\"; "
                     "du -sk . | cut -f1")
        assert r.ok and int(r.output) < 1024, r
        art = rt.snapshot()
    assert "artifact_max_bytes" in art.meta["limit_exceeded"], art.meta
    assert art.files == {}


def test_too_many_files(tmp_path):
    with _runtime(tmp_path, artifact_max_files=50) as rt:
        assert bash(rt, "for i in $(seq 60); do echo $i > f$i; done").ok
        art = rt.snapshot()
    assert "artifact_max_files" in art.meta["limit_exceeded"]
    assert art.files == {}


def test_too_long_a_path(tmp_path):
    with _runtime(tmp_path, artifact_max_path_bytes=200) as rt:
        deep = "/".join(["d" * 50] * 5)
        assert bash(rt, f"mkdir -p {deep} && echo x > {deep}/f").ok
        art = rt.snapshot()
    assert "artifact_max_path_bytes" in art.meta["limit_exceeded"]
    assert art.files == {}


def test_file_names_that_are_not_utf8_round_trip(rt):
    assert bash(rt, "echo a > $'bad\\xff.txt'; mkdir $'dir\\xfe'; echo b > $'dir\\xfe/x'; "
                    "ln -s x $'link\\xfd'").ok
    art = rt.snapshot()
    names = {os.fsencode(p) for p in art.files}
    assert names == {b"bad\xff.txt", b"dir\xfe/x"}, names
    text = json.dumps(art.to_dict())  # what the run record stores
    again = Artifact.from_dict(json.loads(text))
    assert again == art and again.digest == art.digest
    assert art.meta["skipped"] == ["link\\xfd"]
    listing = rt.execute("list_dir", {"path": "."})
    assert listing.ok and "bad" in listing.output, listing


def test_too_deep_a_tree(tmp_path):
    with _runtime(tmp_path, artifact_max_depth=10) as rt:
        assert bash(rt, "mkdir -p " + "/".join("d" * 12) + " && echo x > " + "/".join("d" * 12)
                    + "/f").ok
        art = rt.snapshot()
    assert "artifact_max_depth" in art.meta["limit_exceeded"]
    assert art.files == {}
