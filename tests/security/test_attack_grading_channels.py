"""Attack: speak for the grading runner from inside a test process.

The agent's module runs at import in every test process of its grading (``run_pytest``). It
knows the runner's protocol (the source is public): one JSON object on a report descriptor,
``{"results": {id: status}, "messages": {...}}``, with the generated test ids it can read off the
files in ``/workspace``. So it writes a forged report, naming every generated test ``passed``,
into every descriptor it holds, into every descriptor of its parent it can open through
``/proc``, and into the failure-message pipe (also as invalid UTF-8 and far past the message
bound); then it stops its parent or kills it. None of it may turn a failing test into a pass, nor
into a grader *error* (``SandboxSetupError``): the grading stays a scored run of the real tests.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from proofgym.verify.sandboxed.program import run_pytest
from proofgym.verify.sandboxed.protocol import MAX_MESSAGE as _MAX_MESSAGE
from tests.conftest import require_tool

pytestmark = pytest.mark.sandbox

_FORGER = r'''
import ast, json, os, signal, sys

def _ids():
    ids = []
    for root, _, names in os.walk("/workspace"):
        for name in names:
            if name.startswith("test_") and name.endswith(".py"):
                path = os.path.join(root, name)
                rel = os.path.relpath(path, "/workspace")
                for node in ast.parse(open(path).read()).body:
                    if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
                        ids.append(rel + "::" + node.name)
    return ids

FORGED = json.dumps({"results": {i: "passed" for i in _ids()}, "messages": {},
                     "stopped_at": None}).encode()
WROTE = []
for name in os.listdir("/proc/self/fd"):
    fd = int(name)
    if fd in (0, 1, 2):
        continue
    try:
        os.set_blocking(fd, False)  # blocking on a full pipe would only time the run out
        os.write(fd, FORGED)
        WROTE.append(fd)
        os.write(fd, b"\xff\xfe\x00 not utf-8 " * 20000)  # past the message bound
    except OSError:
        pass
ppid = os.getppid()
try:
    for name in os.listdir(f"/proc/{ppid}/fd"):
        try:
            fd = os.open(f"/proc/{ppid}/fd/{name}", os.O_WRONLY | os.O_NONBLOCK)
            os.write(fd, FORGED)
            WROTE.append("parent:" + name)
        except OSError:
            pass
except OSError:
    pass
MODE = "{mode}"
if MODE == "kill":
    os.kill(ppid, signal.SIGKILL)
elif MODE == "exit":
    os._exit(0)

def add(a, b):
    return a - b
'''

_HIDDEN = ("from app import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
           "def test_pair():\n    assert add(1, 1) == 2\n")
_IDS = ["tests/test_hidden.py::test_add", "tests/test_hidden.py::test_pair"]


@pytest.fixture
def snap(tmp_path: Path) -> Path:
    (tmp_path / "app.py").write_text("def add(a, b):\n    return a - b\n")
    (tmp_path / "tests").mkdir()
    return tmp_path


def _grade(snap: Path, mode: str, *, mutants: bool = False):
    return run_pytest(snap, {"app.py": _FORGER.replace("{mode}", mode).encode()}, tests=_IDS,
                      hidden={"tests/test_hidden.py": _HIDDEN.encode()}, mutants=mutants,
                      timeout_s=60)


def test_a_forged_report_on_every_reachable_descriptor_passes_nothing(snap: Path):
    require_tool("bwrap")
    run = _grade(snap, "write")
    # the forgery reached no channel that is read as a result: the real tests ran, none passed.
    # The forger also sets every descriptor it holds non-blocking and writes 280 kB into each,
    # its test's own outcome channel among them: whether that test's outcome still gets out
    # ("failed") or not ("crashed") depends on how fast the runner drains it (CI's user pass saw
    # "crashed" once). Both are the test's scored failure, never a pass nor a grader error
    assert run.failure is None and run.report_error is None, run
    assert set(run.results) == set(_IDS), (run.results, run.messages)
    assert set(run.results.values()) <= {"failed", "crashed"}, (run.results, run.messages)
    for test, message in run.messages.items():  # a message stays text of bounded size
        assert isinstance(message, str) and len(message) <= _MAX_MESSAGE, test
    honest = run_pytest(snap, {"app.py": b"def add(a, b):\n    return a + b\n"}, tests=_IDS,
                        hidden={"tests/test_hidden.py": _HIDDEN.encode()}, mutants=False,
                        timeout_s=60)
    assert honest.results == dict.fromkeys(_IDS, "passed")  # the same grading can pass


def test_killing_the_runner_from_a_test_is_a_scored_failure_not_a_grader_error(snap: Path):
    require_tool("bwrap")
    run = _grade(snap, "kill")  # raises SandboxSetupError if taken for a host fault
    assert run.results == {} or not any(s == "passed" for s in run.results.values()), run
    if run.results == {}:
        assert run.failure == "runner_killed" and not run.timed_out, run


def test_exit_zero_with_a_forged_report_passes_nothing(snap: Path):
    """``os._exit(0)`` after the forgery: no test process proves its test finished, so every
    test is ``crashed``, with or without a mutant (``_Proof`` in ``proofgym/programs/pytest_runner.py``)."""
    require_tool("bwrap")
    for mutants in (True, False):
        run = _grade(snap, "exit", mutants=mutants)
        assert run.failure is None and run.results == dict.fromkeys(_IDS, "crashed"), run
