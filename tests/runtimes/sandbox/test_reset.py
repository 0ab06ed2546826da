"""Reset: nothing of one episode is visible in the next."""

from __future__ import annotations

import os

import pytest

from proofgym.runtimes.sandbox import SandboxRuntime
from tests.conftest import require_tool
from tests.sandbox_helpers import FAST_LIMITS, bash

pytestmark = pytest.mark.sandbox

_EPISODE_ONE = ("echo secret1 > ws.txt; rm README.md; echo secret2 > /tmp/t.txt; "
                "echo changed >> pkg/__init__.py; mkdir -p deep/dir; echo secret3 > deep/dir/f; "
                "export EP_VAR=secret4; cd deep; alias ll=secret5; sleep 600 >/dev/null 2>&1 & "
                "echo done")


def _assert_fresh(rt: SandboxRuntime) -> None:
    r = bash(rt, "pwd; ls -A; ls -A /tmp; cat pkg/__init__.py; echo \"[$EP_VAR]\"; alias; "
                 "ps -e -o args=; grep -rs secret /workspace /tmp; true")
    assert "secret" not in r.output, r.output
    lines = r.output.splitlines()
    assert lines[0] == "/workspace"
    assert "README.md" in lines and "ws.txt" not in lines and "deep" not in lines
    assert "VALUE = 1" in r.output and "changed" not in r.output
    assert "[]" in lines
    assert "sleep" not in r.output
    assert rt.snapshot().files == {}


@pytest.mark.parametrize("prestart", [True, False])
def test_nothing_of_episode_one_is_visible_in_episode_two(tmp_path, prestart):
    require_tool("bwrap")
    snap = tmp_path / "snap"
    (snap / "pkg").mkdir(parents=True)
    (snap / "pkg" / "__init__.py").write_text("VALUE = 1\n")
    (snap / "README.md").write_text("hello\n")
    with SandboxRuntime(snap, limits=FAST_LIMITS, prestart=prestart) as rt:
        for _ in range(3):
            assert bash(rt, _EPISODE_ONE).output.startswith("done")
            first = rt.snapshot()
            assert first.files["ws.txt"] == b"secret1\n" and first.files["README.md"] is None
            rt.reset()
            _assert_fresh(rt)
            rt.reset()


def test_reset_after_a_killed_shell_and_a_fork_bomb(sandbox):
    bash(sandbox, "echo x > a.txt; :(){ :|:& };:")
    bash(sandbox, "while true; do :; done")
    sandbox.reset()
    _assert_fresh(sandbox)


def test_switching_snapshots(tmp_path):
    require_tool("bwrap")
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "only_a.txt").write_text("a")
    (b / "only_b.txt").write_text("b")
    with SandboxRuntime(a, limits=FAST_LIMITS) as rt:
        assert bash(rt, "ls").output == "only_a.txt"
        bash(rt, "echo leak > leak.txt")
        rt.reset()
        rt.use_snapshot(b)
        assert bash(rt, "ls").output == "only_b.txt"
        rt.use_snapshot(b)  # same tree, episode already used: a fresh episode
        assert bash(rt, "ls").output == "only_b.txt"


def test_closed_runtime_leaves_no_processes_or_files(tmp_path):
    require_tool("bwrap")
    rt = SandboxRuntime(limits=FAST_LIMITS, scratch_dir=tmp_path)
    bash(rt, "echo x > f")
    rt.reset()
    rt.start()
    pids = [rt._shell.proc.pid]
    if rt._spare is not None:  # the prestarted sandbox of the next episode
        pids.append(rt._spare[1].result().proc.pid)
    assert all(os.path.exists(f"/proc/{pid}") for pid in pids)
    rt.close()
    assert list(tmp_path.iterdir()) == []
    assert not any(os.path.exists(f"/proc/{pid}") for pid in pids)
