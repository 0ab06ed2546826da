"""Acceptance 3: 256 concurrent Arith sessions on loopback for a bounded time: none lost, every
episode graded; then 256 sessions whose client is killed with SIGKILL: all freed, nothing leaks
(sessions, sockets, file descriptors)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import httpx
import orjson
import pytest
from websockets.sync.client import connect

from tests.conftest import REPO
from tests.serve_helpers import Served

SESSIONS = 256


def _client(url: str, episodes: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.serve.load_client", url, str(SESSIONS),
                             str(episodes)], stdout=subprocess.PIPE, text=True, cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO)})


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _health(served: Served) -> dict:
    return httpx.get(f"{served.url}/health").json()


def _wait(check, what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


@pytest.mark.slow
def test_256_concurrent_sessions_none_lost_and_no_leak_after_a_kill():
    # a training server: sampled resets draw train tasks (none refused by the held-out guard)
    with Served("proofgym/Arith-v0", "--verifier", "inline", "--split", "train",
                "--max-sessions", str(SESSIONS)) as served:
        pid = served.proc.pid
        _wait(lambda: _fds(pid) > 0, "no server process")
        # 1. 256 sessions at once, two episodes each, every step answered and every episode graded
        client = _client(served.ws_url, 2)
        out, _ = client.communicate(timeout=240)
        result = json.loads(out.strip().splitlines()[-1])
        assert client.returncode == 0
        assert result["errors"] == 0
        assert result["episodes"] == result["graded"] == 2 * SESSIONS
        assert result["steps"] == 4 * SESSIONS
        _wait(lambda: _health(served)["active_sessions"] == 0, "closed sessions were not freed")
        assert _health(served)["opened"] == SESSIONS
        settled = _fds(pid)
        # 2. 256 sessions mid-episode, then their client is killed: every one is freed
        client = _client(served.ws_url, 0)
        line = client.stdout.readline()  # type: ignore[union-attr]
        assert line.startswith("ready") and json.loads(line.split(" ", 1)[1])["ready"] == SESSIONS
        assert _health(served)["active_sessions"] == SESSIONS
        extra = connect(f"{served.ws_url}/ws").__enter__()  # one more: a typed refusal, not a hang
        assert orjson.loads(extra.recv(timeout=30))["data"]["code"] == "CAPACITY_REACHED"
        extra.close()
        assert _fds(pid) >= settled + SESSIONS - 2  # a socket per session, while they live
        client.send_signal(signal.SIGKILL)
        client.wait()
        _wait(lambda: _health(served)["active_sessions"] == 0, "a killed client's sessions leaked")
        _wait(lambda: _fds(pid) <= settled + 2, f"file descriptors leaked: {_fds(pid)} > {settled}")
        health = _health(served)
        assert health["opened"] == 2 * SESSIONS and health["status"] == "healthy"
        # and the server still serves
        again = _client(served.ws_url, 1)
        out, _ = again.communicate(timeout=240)
        assert json.loads(out.strip().splitlines()[-1])["graded"] == SESSIONS
    assert served.proc.returncode == 0  # SIGTERM drained it cleanly
