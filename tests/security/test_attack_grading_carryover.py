"""Attack: leave something behind in one grading for the next one to find.

The agent's code runs at import in its grading (``run_pytest`` and ``run_program``). It starts
background processes (one in a new session, one double-forked), writes to ``/tmp``,
``/dev/shm``, the workspace and its import cache (a ``.pyc`` for the module under test), and
patches ``sys.modules``. Every grading must start from a fresh state: the next grading over the
same snapshot sees none of it, no process outlives its grading on the host, and the snapshot
directory is unchanged.
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path

import pytest

from proofgym.verify.sandboxed import files_under
from proofgym.verify.sandboxed.program import run_program, run_pytest
from tests.conftest import require_tool

pytestmark = pytest.mark.sandbox

_POISON = '''
import os, subprocess, sys, time
TOKEN = "{token}"
for path in ("/tmp/poison-" + TOKEN, "/dev/shm/poison-" + TOKEN, "/workspace/poison-" + TOKEN):
    try:
        with open(path, "w") as f:
            f.write(TOKEN)
    except OSError:
        pass
os.makedirs("/workspace/__pycache__", exist_ok=True)
with open(f"/workspace/__pycache__/app.cpython-{{sys.version_info[0]}}{{sys.version_info[1]}}.pyc",
          "wb") as f:
    f.write(b"poisoned")
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)  # " + TOKEN],
                 start_new_session=True)
if os.fork() == 0:
    if os.fork() == 0:
        os.setsid()
        while True:
            with open("/tmp/daemon-" + TOKEN, "a") as f:
                f.write("alive " + TOKEN)
            time.sleep(0.05)
    os._exit(0)
sys.modules["json"] = type(sys)("json")
POISONED = True

def add(a, b):
    return a + b
'''

_PROBE = '''
import os, sys

TOKEN = "{token}"


def test_clean():
    for path in ("/tmp/poison-" + TOKEN, "/dev/shm/poison-" + TOKEN, "/tmp/daemon-" + TOKEN,
                 "/workspace/poison-" + TOKEN, "/workspace/__pycache__"):
        assert not os.path.exists(path), path
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmdline = open(f"/proc/{{pid}}/cmdline", "rb").read()
            except OSError:
                continue
            assert TOKEN.encode() not in cmdline, cmdline
    import app
    import json
    assert not hasattr(app, "POISONED") and hasattr(json, "dumps")
'''


def _host_processes_with(token: str) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if token.encode() in cmdline and pid != str(os.getpid()):
                found.append(cmdline.decode(errors="replace"))
    return found


def test_nothing_one_grading_leaves_reaches_the_next(tmp_path: Path):
    require_tool("bwrap")
    token = secrets.token_hex(8)
    (tmp_path / "app.py").write_text("def add(a, b):\n    return a - b\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_app.py").write_text(
        "from app import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n")
    before = files_under(tmp_path)
    poison = {"app.py": _POISON.format(token=token).encode()}
    run_pytest(tmp_path, poison, tests=["tests/test_app.py::test_add"], timeout_s=60)
    alive = run_program(tmp_path, poison, argv=["python3", "-c", (
        "import app, os, time; time.sleep(0.3)\n"
        "assert all(os.path.exists(p + app.TOKEN) for p in ('/tmp/poison-', '/tmp/daemon-', "
        "'/workspace/poison-'))")], timeout_s=30)  # /dev/shm is read-only in there
    assert alive.ok, alive.stderr_text  # the attack works within its own grading

    deadline = time.monotonic() + 10  # the sandbox is torn down just after the result
    while _host_processes_with(token) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _host_processes_with(token) == []
    assert files_under(tmp_path) == before
    assert not any(token in p.name for p in Path("/tmp").glob("*"))

    probe = {"tests/test_probe.py": _PROBE.format(token=token).encode()}
    clean = {"app.py": b"def add(a, b):\n    return a + b\n"}
    run = run_pytest(tmp_path, clean, tests=["tests/test_probe.py::test_clean"], hidden=probe,
                     mutants=False, timeout_s=60)
    assert run.results == {"tests/test_probe.py::test_clean": "passed"}, (run, run.messages)
    program = run_program(tmp_path, clean, argv=["python3", "-c", "import test_probe as t; t.test_clean()"],
                          hidden={"test_probe.py": probe["tests/test_probe.py"]}, timeout_s=30)
    assert program.ok, program.stderr_text
