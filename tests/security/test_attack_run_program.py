"""Attack: abuse ``run_program`` (a grader running the agent's program) beyond its output.

The program is the agent's. It fork-bombs, fills its output without a newline, leaves a
background process holding the output pipe after the main process exits, writes wherever it can
(the snapshot through the workspace, the host's ``/tmp``, the system), ignores its stdin, and
reads the host's environment. Each call must end within its time limit with a bounded result,
change nothing outside its own sandbox, and leave no process behind; the next call works.
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path

import pytest

from proofgym.runtimes.sandbox import SandboxLimits
from proofgym.verify.sandboxed import files_under
from proofgym.verify.sandboxed.program import MAX_PROGRAM_OUTPUT, run_program, run_pytest
from tests.conftest import require_tool

pytestmark = pytest.mark.sandbox

_LIMITS = SandboxLimits(max_processes=32, memory_mb=256)


@pytest.fixture
def snap(tmp_path: Path) -> Path:
    root = tmp_path / "snap"
    root.mkdir()
    (root / "data.txt").write_text("snapshot data\n")
    return root


def _host_processes_with(token: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if token.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                    found.append(int(pid))
            except OSError:
                continue
    return [p for p in found if p != os.getpid()]


def test_a_fork_bomb_ends_at_the_time_limit_and_leaves_nothing(snap: Path):
    require_tool("bwrap")
    token = secrets.token_hex(6)
    t0 = time.monotonic()
    for bomb in (f"b() {{ b | b; }}; b  # {token}",  # in the foreground: runs to the time limit
                 f"b() {{ b | b & }}; b  # {token}"):  # in the background: the main shell exits
        run = run_program(snap, {}, argv=["bash", "-c", bomb], timeout_s=3, limits=_LIMITS)
        assert len(run.stdout) <= MAX_PROGRAM_OUTPUT and len(run.stderr) <= MAX_PROGRAM_OUTPUT
    assert time.monotonic() - t0 < 60
    deadline = time.monotonic() + 10
    while _host_processes_with(token) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _host_processes_with(token) == []
    after = run_program(snap, {}, argv=["cat", "data.txt"], timeout_s=30, limits=_LIMITS)
    assert after.ok and after.stdout == b"snapshot data\n"


def test_output_floods_and_a_background_writer_are_bounded_and_timed(snap: Path):
    require_tool("bwrap")
    flood = run_program(snap, {}, argv=["python3", "-c", (
        "import os, sys\n"
        "chunk = b'x' * 65536\n"
        "for _ in range(64):\n"
        "    os.write(1, chunk); os.write(2, chunk)\n")], timeout_s=30)
    assert flood.truncated and len(flood.stdout) == MAX_PROGRAM_OUTPUT
    assert len(flood.stderr) == MAX_PROGRAM_OUTPUT and flood.exit_code == 0
    # the main process exits 0 at once; its child keeps the output pipe open and writes forever
    lingering = run_program(snap, {}, argv=["bash", "-c", "(while :; do echo tick; sleep 0.01; done) "
                                                          "& exit 0"], timeout_s=2)
    assert lingering.timed_out or lingering.exit_code == 0
    assert len(lingering.stdout) <= MAX_PROGRAM_OUTPUT
    ignored = run_program(snap, {}, argv=["sleep", "0.2"], stdin=b"y" * (8 << 20), timeout_s=10)
    assert ignored.ok  # 8 MB of stdin nobody reads does not hang the grader


def test_the_program_writes_nothing_outside_its_sandbox(snap: Path, tmp_path: Path):
    require_tool("bwrap")
    token = secrets.token_hex(6)
    os.environ["PROOFGYM_ATTACK_SECRET"] = token
    try:
        before = files_under(snap)
        host_tmp = set(os.listdir("/tmp"))
        run = run_program(snap, {}, argv=["bash", "-c", (
            f"echo {token} > data.txt; echo {token} > /tmp/{token}; "
            f"echo {token} > /usr/{token} 2>/dev/null; echo {token} > /{token} 2>/dev/null; "
            f"echo {token} > {snap}/data.txt 2>/dev/null; echo {token} > {tmp_path}/{token} 2>/dev/null; "
            "env; cat /proc/1/environ 2>/dev/null | tr '\\0' '\\n'; true")], timeout_s=30)
    finally:
        del os.environ["PROOFGYM_ATTACK_SECRET"]
    assert run.ok, run.stderr_text
    assert "PROOFGYM_ATTACK_SECRET" not in run.stdout_text  # no host variable inside
    assert files_under(snap) == before
    assert not any(token in name for name in set(os.listdir("/tmp")) - host_tmp)
    assert not Path(f"/usr/{token}").exists() and not Path(f"/{token}").exists()
    assert not (tmp_path / token).exists()


@pytest.mark.parametrize("changes", [
    {"check.py": None},  # a deletion of the grader's file (a whiteout as root, rm -f without)
    {"check.py": b"print('agent wins')\n"},
    {"check.py/inner.py": b"x = 1\n"},  # a directory where the grader's file goes
    {"pkg": None},  # the grader's file's directory deleted
    {"pkg/extra.py": None, "pkg/mod.py": b"VALUE = 'agent'\n"},
])
def test_the_artifact_cannot_displace_or_delete_a_graders_file(snap: Path, changes):
    require_tool("bwrap")
    (snap / "check.py").write_text("print('snapshot stub')\n")
    (snap / "pkg").mkdir()
    (snap / "pkg" / "mod.py").write_text("VALUE = 'snapshot'\n")
    (snap / "pkg" / "extra.py").write_text("WHO = 'snapshot'\n")
    hidden = {"check.py": b"from pkg.extra import WHO\nprint('hidden', WHO)\n",
              "pkg/extra.py": b"WHO = 'grader'\n"}
    run = run_program(snap, changes, argv=["python3", "check.py"], hidden=hidden, timeout_s=30)
    # raised before the fix: PermissionError opening the whiteout (as root); without root the
    # deletion ran after the grader's file was written and removed it
    assert run.ok and run.stdout_text == "hidden grader\n", run


@pytest.mark.parametrize("path", ["a//b.py", "lib/", "app.py/", "./app.py", "a/./b.py", "."])
def test_a_change_under_a_non_canonical_name_is_dropped_not_a_grader_error(snap: Path, path: str):
    """Changes given as a mapping whose keys the agent chose (a submit tool, a patch): a name
    spelled with an empty or ``.`` component reached the runner as the name ``''`` and the
    grading raised ``SandboxSetupError`` (a grader error the agent caused)."""
    require_tool("bwrap")
    (snap / "app.py").write_text("def add(a, b):\n    return a - b\n")
    hidden = {"tests/test_h.py": b"from app import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"}
    run = run_pytest(snap, {path: b"def add(a, b):\n    return a + b\n"},
                     tests=["tests/test_h.py::test_add"], hidden=hidden, mutants=False, timeout_s=30)
    assert run.dropped == (path,) and run.results == {"tests/test_h.py::test_add": "failed"}, run
    program = run_program(snap, {path: b"x = 1\n"}, argv=["true"], timeout_s=30)
    assert program.ok and program.dropped == (path,), program
