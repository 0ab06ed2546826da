"""SandboxRuntime basics: tools, the persistent shell, typed errors, snapshots, artifacts."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import pytest

from proofgym import Artifact, Runtime, SandboxRuntime
from proofgym.runtimes.sandbox import SandboxSetupError
from tests.conftest import REPO
from tests.sandbox_helpers import bash

pytestmark = pytest.mark.sandbox


def test_is_a_runtime_with_the_five_tools(sandbox):
    assert isinstance(sandbox, Runtime)
    assert sandbox.tools.names == ["bash", "read_file", "write_file", "str_replace", "list_dir"]
    schema = {s["function"]["name"]: s["function"]["parameters"] for s in sandbox.tools.schemas()}
    assert set(schema["read_file"]["properties"]) == {"path", "start_line", "end_line"}
    assert sandbox.config()["network"] is False


def test_shell_state_persists_between_commands(sandbox):
    assert bash(sandbox, "cd pkg && export FOO=bar").ok
    r = bash(sandbox, 'pwd; echo "$FOO"')
    assert r.output == "/workspace/pkg\nbar"


def test_exit_code_and_stderr_are_reported(sandbox):
    r = bash(sandbox, "echo out; echo err >&2; exit_status() { return 3; }; exit_status")
    assert r.ok and "out" in r.output and "err" in r.output and "[exit code 3]" in r.output


def test_quoting_survives_any_text(sandbox):
    text = "it's \"quoted\" $HOME `x` \\n \u00e9\u4e2d \t end"
    r = sandbox.execute("write_file", {"path": "q.txt", "content": text})
    assert r.ok, r.output
    assert sandbox.execute("read_file", {"path": "q.txt"}).output == text
    assert bash(sandbox, "printf '%s' " + "'it'\\''s'").output == "it's"


def test_file_tools(sandbox):
    assert sandbox.execute("read_file", {"path": "pkg/__init__.py"}).output == "VALUE = 1\n"
    sandbox.execute("write_file", {"path": "new/dir/f.py", "content": "a\nb\nc\nd\n"})
    r = sandbox.execute("read_file", {"path": "new/dir/f.py", "start_line": 2, "end_line": 3})
    assert r.output == "b\nc\n"
    assert sandbox.execute("str_replace", {"path": "pkg/__init__.py", "old_str": "VALUE = 1",
                                           "new_str": "VALUE = 2"}).ok
    assert bash(sandbox, "python -c 'import pkg; print(pkg.VALUE)'").output == "2"
    listing = sandbox.execute("list_dir", {"path": "."}).output.splitlines()
    assert {"pkg/", "new/", "README.md", "old/"} <= set(listing)


def test_file_tool_errors_are_typed(sandbox):
    cases = [
        ("read_file", {"path": "missing.py"}, "execution_error", "does not exist"),
        ("read_file", {"path": "pkg"}, "execution_error", "directory"),
        ("read_file", {"path": "../etc/passwd"}, "denied", "outside the workspace"),
        ("write_file", {"path": "/etc/x", "content": "x"}, "denied", "outside the workspace"),
        ("str_replace", {"path": "README.md", "old_str": "nope", "new_str": "x"},
         "execution_error", "occurs 0 times"),
        ("read_file", {"path": "a", "start_line": 0}, "invalid_arguments", "start_line"),
        ("read_file", {"paths": "a"}, "invalid_arguments", "path"),
        ("bash", "{not json", "invalid_arguments", "not valid JSON"),
        ("rm_rf", {}, "unknown_tool", "available tools"),
    ]
    for tool, args, kind, text in cases:
        r = sandbox.execute(tool, args)
        assert r.error_kind is not None and r.error_kind.value == kind, (tool, args, r)
        assert text in r.output, (tool, r.output)


def test_snapshot_holds_exactly_the_changes(sandbox):
    assert sandbox.snapshot().files == {}
    bash(sandbox, "echo new > created.txt && rm README.md && rm -r old && echo 'VALUE = 1' > pkg/__init__.py"
                  " && mkdir -p pkg/__pycache__ && echo x > pkg/__pycache__/m.pyc && echo t > /tmp/t")
    sandbox.execute("write_file", {"path": "pkg/extra.py", "content": "X = 1\n"})
    art = sandbox.snapshot()
    # rewriting pkg/__init__.py with its old content is no change; caches and /tmp are not work
    assert dict(art.files) == {"created.txt": b"new\n", "README.md": None, "old/a.txt": None,
                               "pkg/extra.py": b"X = 1\n"}
    assert art.runtime == "sandbox"


def test_links_and_special_files_are_not_part_of_the_artifact(sandbox):
    bash(sandbox, "ln -s /etc/passwd link && ln -s /usr dirlink && mkfifo fifo && echo real > real.txt")
    art = sandbox.snapshot()
    assert dict(art.files) == {"real.txt": b"real\n"}
    assert sorted(art.meta["skipped"]) == ["dirlink", "fifo", "link"]


def test_deleted_and_recreated_directory(sandbox):
    bash(sandbox, "rm -r old && mkdir old && echo b > old/b.txt")
    assert dict(sandbox.snapshot().files) == {"old/a.txt": None, "old/b.txt": b"b\n"}


def test_artifact_round_trips_across_processes(sandbox):
    sandbox.execute("write_file", {"path": "bin.dat", "content": "\u00ff\u0000x"})
    bash(sandbox, "rm README.md")
    art = sandbox.snapshot()
    assert Artifact.from_dict(art.to_dict()) == art
    assert pickle.loads(pickle.dumps(art)) == art
    code = ("import pickle, sys; a = pickle.load(sys.stdin.buffer); "
            "print(sorted((k, v) for k, v in a.files.items()))")
    out = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(art), capture_output=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)}, check=True).stdout.decode()
    assert out.strip() == str(sorted(art.files.items()))


def test_snapshot_is_frozen(sandbox):
    sandbox.execute("write_file", {"path": "a.txt", "content": "1"})
    art = sandbox.snapshot()
    sandbox.execute("write_file", {"path": "a.txt", "content": "2"})
    sandbox.reset()
    assert art.files == {"a.txt": b"1"}


def test_missing_bwrap_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SandboxSetupError, match="apt-get install -y bubblewrap"):
        SandboxRuntime()


def test_bad_snapshot_is_a_clear_error(sandbox, tmp_path):
    from proofgym.runtimes.sandbox import SnapshotSourceError

    with pytest.raises(SnapshotSourceError, match="does not exist"):
        sandbox.use_snapshot(tmp_path / "nope")
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(SnapshotSourceError, match="not an archive"):
        sandbox.use_snapshot(tmp_path / "file.txt")
