"""The path taken without root (user + mount namespace between fork and exec) isolates the same
way. Here, as root, it is forced by making the runtime believe it is not root (the sandbox is then
mapped onto host root, so this checks the mechanics only); CI also runs the sandbox and security
suites as an ordinary user (``.ci/as-user``), where this path is taken for real."""

from __future__ import annotations

import os

import pytest

from proofgym.runtimes.sandbox import SandboxRuntime
from tests.conftest import require_tool
from tests.sandbox_helpers import FAST_LIMITS, bash

pytestmark = pytest.mark.sandbox


def test_user_namespace_path(tmp_path, monkeypatch):
    require_tool("bwrap")
    snap = tmp_path / "snap"
    snap.mkdir()
    (snap / "keep.txt").write_text("keep\n")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with SandboxRuntime(snap, limits=FAST_LIMITS, prestart=False) as rt:
        r = bash(rt, "id -u; cat keep.txt; echo new > new.txt; rm keep.txt; echo x > /usr/x; "
                     "ls /root /work 2>&1 | wc -l")
        assert r.output.splitlines()[:2] == ["1000", "keep"]
        assert "Read-only file system" in r.output
        assert bash(rt, "sleep 30").error_kind.value == "timeout"
        assert bash(rt, "echo alive").output == "alive"
        assert rt.snapshot().files == {"keep.txt": None, "new.txt": b"new\n"}
        rt.reset()
        assert bash(rt, "ls").output == "keep.txt"
    assert (snap / "keep.txt").read_text() == "keep\n"
