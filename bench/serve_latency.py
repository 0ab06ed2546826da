"""Step latency of a served env (HTTP and WebSocket) against the same env in process (bench/harness.py).

    python bench/serve_latency.py [--quick]   # under a minute on 2 cores

Rows (p50 and p99 of one Arith step, a ``calculator`` call, measured by the client):
  * in process: ``env.step`` on ``make_env("proofgym/Arith-v0")``.
  * one session through :class:`proofgym.remote.RemoteEnv`: ``proofgym serve`` in its own process
    on loopback, driven over HTTP (httpx, the wire's messages; the round trip, JSON both ways and
    the server's session lock included).
  * 64 sessions at once over WebSocket (asyncio clients in one process): the server under load.

Each row runs in a fresh process, with the load average before and after (a row measured above
the harness's load limit is marked as not a valid measurement).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import ROOT, Bench, Row, Target, Value, quantile

CALL = {"tool_name": "calculator", "tool_input": {"expression": "12*(3+4)"}}


def _steps(args: argparse.Namespace) -> int:
    return 200 if args.quick else 2000


def _serve() -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "proofgym", "serve", "proofgym/Arith-v0", "--port", "0",
                             "--verifier", "inline", "--split", "train"], stdout=subprocess.PIPE,
                            text=True, env=env)
    line = proc.stdout.readline()  # type: ignore[union-attr]
    found = re.search(r"on http://([\d.]+):(\d+) ", line)
    if found is None:
        proc.kill()
        raise SystemExit(f"proofgym serve did not start: {line}")
    return proc, f"ws://{found.group(1)}:{found.group(2)}"


def _row(prefix: str, latencies: list[float], detail: str) -> dict[str, Value]:
    return {f"{prefix}_p50": Value(quantile(latencies, 0.5) * 1000, "ms", detail),
            f"{prefix}_p99": Value(quantile(latencies, 0.99) * 1000, "ms", detail)}


def probe_inprocess(args: argparse.Namespace) -> Mapping[str, Value]:
    from proofgym import ToolCallAction, make_env

    env = make_env("proofgym/Arith-v0")
    env.tasks = env.tasks.split("train")
    action = ToolCallAction(CALL["tool_name"], CALL["tool_input"])
    latencies = []
    done = True
    for i in range(_steps(args)):
        if done:  # the tool-call budget ran out: a new episode (not timed)
            env.reset(seed=i)
        t0 = time.perf_counter()
        _obs, _r, terminated, truncated, _info = env.step(action)
        latencies.append(time.perf_counter() - t0)
        done = terminated or truncated
    return _row("inprocess", latencies, f"{len(latencies)} steps")


def probe_remote(args: argparse.Namespace) -> Mapping[str, Value]:
    from proofgym import ToolCallAction
    from proofgym.remote import RemoteEnv

    proc, url = _serve()
    try:
        env = RemoteEnv(url)
        action = ToolCallAction(CALL["tool_name"], CALL["tool_input"])
        latencies = []
        done = True
        for i in range(_steps(args)):
            if done:
                env.reset(seed=i)
            t0 = time.perf_counter()
            _obs, _r, terminated, truncated, _info = env.step(action)
            latencies.append(time.perf_counter() - t0)
            done = terminated or truncated
        env.close()
    finally:
        proc.terminate()
        proc.wait(30)
    return _row("remote", latencies, f"{len(latencies)} steps, one session")


async def _many(url: str, sessions: int, steps: int) -> list[float]:
    from websockets.asyncio.client import connect

    latencies: list[float] = []

    async def one(index: int) -> None:
        async with connect(f"{url}/ws", max_size=None, open_timeout=120) as ws:
            done = True
            for i in range(steps):
                if done:
                    await ws.send(json.dumps({"type": "reset", "data": {"seed": index * 10_000 + i}}))
                    await ws.recv()
                t0 = time.perf_counter()
                await ws.send(json.dumps({"type": "step", "data": CALL}))
                reply = json.loads(await ws.recv())
                latencies.append(time.perf_counter() - t0)
                if reply["type"] != "observation":
                    raise RuntimeError(f"the server refused a step: {reply}")
                done = reply["data"]["done"]

    await asyncio.gather(*(one(i) for i in range(sessions)))
    return latencies


def probe_concurrent(args: argparse.Namespace) -> Mapping[str, Value]:
    proc, url = _serve()
    sessions = 64
    try:
        latencies = asyncio.run(_many(url, sessions, max(10, _steps(args) // 20)))
    finally:
        proc.terminate()
        proc.wait(30)
    return _row("concurrent", latencies, f"{len(latencies)} steps over {sessions} sessions")


PROBES = {"inprocess": probe_inprocess, "remote": probe_remote, "concurrent": probe_concurrent}
ROWS = [
    Row("inprocess_p50", "Arith step in process, p50", None, "inprocess"),
    Row("inprocess_p99", "Arith step in process, p99", None, "inprocess"),
    Row("remote_p50", "Arith step via RemoteEnv (HTTP), one session, p50", Target("<=", 5, "ms"), "remote"),
    Row("remote_p99", "Arith step via RemoteEnv (HTTP), one session, p99", Target("<=", 20, "ms"), "remote"),
    Row("concurrent_p50", "Arith step over WebSocket, 64 sessions at once, p50", None, "concurrent"),
    Row("concurrent_p99", "Arith step over WebSocket, 64 sessions at once, p99", None, "concurrent"),
]
BENCH = Bench("proofgym serve: step latency over HTTP and WebSocket vs in process", PROBES, ROWS,
              description=__doc__ or "")


if __name__ == "__main__":
    BENCH.main(__file__)
