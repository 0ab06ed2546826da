"""A session owns its sandbox: a client killed with SIGKILL leaves no sandbox, mount or process
on the server, and SIGTERM drains (the call in flight finishes, then every sandbox is closed)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import pytest

from proofgym import ToolCallAction, make_env
from proofgym.remote import RemoteEnv
from tests.conftest import REPO, require_tool
from tests.serve_helpers import Served, descendants

pytestmark = pytest.mark.sandbox
ENV = "proofgym/CodeRepair-v0"

CLIENT = """
import sys, time
from proofgym import ToolCallAction
from proofgym.remote import RemoteEnv
env = RemoteEnv(sys.argv[1])
env.reset(options={"task_id": sys.argv[2]})
print(env.step(ToolCallAction("bash", {"command": "sleep 300 & echo started"}))[0]["observation"], flush=True)
time.sleep(600)
"""


def _scratch(server_pid: int) -> list[Path]:
    return sorted(Path(tempfile.gettempdir()).glob(f"proofgym-sandbox-{server_pid}-*"))


def _mounts(server_pid: int) -> list[str]:
    lines = Path("/proc/self/mountinfo").read_text().splitlines()
    return [ln for ln in lines if f"proofgym-sandbox-{server_pid}-" in ln]


def _wait(check, what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def _task_id() -> str:
    tasks = make_env(ENV).tasks
    return next(t for t in tasks.ids if tasks.split_of(t) == "train")


def test_a_client_killed_with_sigkill_leaves_nothing_behind():
    require_tool("bwrap")
    with Served(ENV, "--verifier", "inline") as served:
        pid = served.proc.pid
        baseline = descendants(pid)
        client = subprocess.Popen([sys.executable, "-c", CLIENT, served.url, _task_id()],
                                  stdout=subprocess.PIPE, text=True,
                                  env={**os.environ, "PYTHONPATH": str(REPO)})
        try:
            assert "started" in client.stdout.readline()  # type: ignore[union-attr]
            sandbox = descendants(pid) - baseline
            assert sandbox, "the session's sandbox runs no process"
            assert _scratch(pid), "the session's sandbox has no scratch space"
            assert httpx.get(f"{served.url}/health").json()["active_sessions"] == 1
        finally:
            client.send_signal(signal.SIGKILL)
            client.wait()
        _wait(lambda: httpx.get(f"{served.url}/health").json()["active_sessions"] == 0,
              "the killed client's session was never closed")
        _wait(lambda: not (descendants(pid) - baseline), "the sandbox's processes outlived the session")
        _wait(lambda: not [p for p in sandbox if Path(f"/proc/{p}").exists()],
              "a sandbox process (the backgrounded sleep 300 included) outlived the session")
        _wait(lambda: not _scratch(pid), "the sandbox's scratch space outlived the session")
        assert _mounts(pid) == []


def test_sigterm_drains_the_call_in_flight_then_closes_every_sandbox():
    require_tool("bwrap")
    served = Served(ENV, "--verifier", "inline", "--drain", "20")
    pid = served.proc.pid
    env = RemoteEnv(served.url)
    try:
        env.reset(options={"task_id": _task_id()})
        result: list = []

        def slow_step() -> None:
            result.append(env.step(ToolCallAction("bash", {"command": "sleep 2; echo slow-done"})))

        worker = threading.Thread(target=slow_step)
        worker.start()
        time.sleep(0.7)  # the step is running in the sandbox now
        sandbox = descendants(pid)
        assert sandbox
        served.proc.send_signal(signal.SIGTERM)
        # draining: new sessions are refused, with a code that says so
        _wait(lambda: httpx.get(f"{served.url}/health").json()["status"] == "draining",
              "SIGTERM did not start a drain")
        late = httpx.post(f"{served.url}/reset", json={})
        assert late.status_code == 503 and late.json()["error"]["code"] == "DRAINING"
        worker.join(30)
        assert result and "slow-done" in result[0][0]["observation"]  # finished, not cut off
        assert served.proc.wait(30) == 0
        _wait(lambda: not [p for p in sandbox if Path(f"/proc/{p}").exists()],
              "a sandbox process outlived the drained server")
        assert not _scratch(pid)
    finally:
        env.close()
        served.stop()
