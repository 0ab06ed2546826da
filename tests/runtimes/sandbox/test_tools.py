"""Composable sandbox tools: choose, add, remove and replace; the schemas the agent is shown
follow the runtime's real tools, and a tool of one's own runs inside the sandbox."""

from __future__ import annotations

import shlex

import pytest

from proofgym import TaskSpec, ToolCallAction, TurnCompleteAction
from proofgym.core import ProofgymError, Task
from proofgym.env import UniversalVerifiableEnv
from proofgym.runtimes.sandbox import DEFAULT_TOOLS, Sandbox, SandboxRuntime, UnknownToolError
from proofgym.tools import ToolContext, tool
from tests.conftest import require_tool
from tests.sandbox_helpers import FAST_LIMITS


@tool
def run_python(code: str, sandbox: Sandbox) -> str:
    """Run a Python program in the workspace and return its output.

    Args:
        code: The program's source code.
    """
    return sandbox.run_bash("python -c " + shlex.quote(code))


@tool(name="bash")
def restricted_bash(command: str, sandbox: Sandbox) -> str:
    """Run one of a few read-only commands (ls, cat).

    Args:
        command: The command line.
    """
    if shlex.split(command)[:1] not in (["ls"], ["cat"]):
        return "only ls and cat are allowed here"
    return sandbox.run_bash(command)


@tool
def note(text: str, sandbox: Sandbox) -> str:
    """Append a line to notes.txt in the workspace.

    Args:
        text: The line.
    """
    try:
        old = sandbox.read_file("notes.txt")
    except Exception:
        old = ""
    sandbox.write_file("notes.txt", old + text + "\n")
    return "noted"


def names(rt: SandboxRuntime) -> list[str]:
    return [s["function"]["name"] for s in rt.tools.schemas()]


class Echo(Task):  # a minimal task: the env fills TaskSpec.tools from the runtime
    id = "echo"

    def get_spec(self) -> TaskSpec:
        return TaskSpec("say something")

    def setup_runtime(self, runtime) -> None:
        runtime.use_snapshot({"seed.txt": "42\n"})

    def verify(self, trace, runtime) -> float:
        return 0.0


def test_defaults_are_unchanged(tmp_path) -> None:
    require_tool("bwrap")
    with SandboxRuntime(limits=FAST_LIMITS) as rt:
        assert names(rt) == list(DEFAULT_TOOLS) == ["bash", "read_file", "write_file", "str_replace",
                                                     "list_dir"]


def test_add_run_python_and_remove_write_file(tmp_path, monkeypatch) -> None:
    require_tool("bwrap")
    monkeypatch.setenv("PROOFGYM_SNAPSHOT_CACHE", str(tmp_path / "cache"))
    with SandboxRuntime(limits=FAST_LIMITS, tools=["bash", "read_file", run_python, note]) as rt:
        assert names(rt) == ["bash", "read_file", "run_python", "note"]
        env = UniversalVerifiableEnv(rt)
        _, info = env.reset(seed=0, options={"task": Echo()})
        assert [t["function"]["name"] for t in info["tools"]] == names(rt)
        run_schema = next(t for t in info["tools"] if t["function"]["name"] == "run_python")
        assert list(run_schema["function"]["parameters"]["properties"]) == ["code"]  # no sandbox
        code = "print(open('seed.txt').read().strip() * 2)"
        obs, *_ = env.step(ToolCallAction("run_python", {"code": code}))
        assert obs["observation"].strip() == "4242"
        obs, *_ = env.step(ToolCallAction("run_python", {"code": "import sys; sys.exit(3)"}))
        assert "[exit code 3]" in obs["observation"]
        obs, *_ = env.step(ToolCallAction("write_file", {"path": "x.py", "content": "1"}))
        assert "unknown tool 'write_file'" in obs["observation"]
        assert rt.execute("note", {"text": "one"}).output == "noted"
        rt.execute("note", {"text": "two"})
        assert rt.execute("read_file", {"path": "notes.txt"}).output == "one\ntwo\n"
        artifact = rt.snapshot()
        assert artifact.files == {"notes.txt": b"one\ntwo\n"}  # the tools wrote in the sandbox
        env.step(TurnCompleteAction("done"))


def test_replace_bash(tmp_path) -> None:
    require_tool("bwrap")
    with SandboxRuntime({"a.txt": "A\n"}, limits=FAST_LIMITS, tools=[restricted_bash, "list_dir"]) as rt:
        assert names(rt) == ["bash", "list_dir"]
        assert rt.tools["bash"].description.startswith("Run one of a few read-only commands")
        assert rt.execute("bash", {"command": "cat a.txt"}).output == "A"
        assert rt.execute("bash", {"command": "rm a.txt"}).output == "only ls and cat are allowed here"
        assert rt.execute("list_dir", {}).output == "a.txt\n"


def test_bad_tool_lists_are_clear_errors() -> None:
    with pytest.raises(UnknownToolError, match=r"tool 'run_pyton'.*bash, read_file") as caught:
        SandboxRuntime(tools=["bash", "run_pyton"])
    assert isinstance(caught.value, ProofgymError)
    with pytest.raises(UnknownToolError, match="two tools are named 'bash'"):
        SandboxRuntime(tools=["bash", restricted_bash])
    with pytest.raises(UnknownToolError, match="sequence"):
        SandboxRuntime(tools="bash")  # type: ignore[arg-type]
    with pytest.raises(UnknownToolError, match="empty"):
        SandboxRuntime(tools=[])
    with pytest.raises(UnknownToolError, match="Tool objects"):
        SandboxRuntime(tools=[print])  # type: ignore[list-item]


def test_a_sandbox_tool_outside_a_sandbox_says_so() -> None:
    from proofgym.runtimes.inprocess import InProcessRuntime

    rt = InProcessRuntime([run_python])
    result = rt.execute("run_python", {"code": "print(1)"})
    assert not result.ok and "needs a Sandbox" in result.output
    assert ToolContext  # the other injected type keeps working (tests/tools/test_tools.py)
