"""The CLI: ``proofgym eval --policy openai:MODEL`` and ``proofgym serve-scripted``, as real processes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import httpx
import orjson
from conftest import REPO, run_cli

from proofgym.eval import evaluate, make_env
from proofgym.rollout import OpenAIPolicy
from proofgym.testing import Fault, ReferenceScript, ScriptedServer


def test_eval_cli_runs_an_openai_policy_concurrently_with_groups(tmp_path) -> None:
    tasks = make_env("proofgym/Arith-v0").tasks
    with ScriptedServer(ReferenceScript(tasks), faults=[Fault("429", rate=0.3)]) as server:
        proc = run_cli("eval", "proofgym/Arith-v0", "-n", "6", "--policy", "openai:scripted",
                       "--base-url", server.base_url, "--concurrency", "4", "--repeats", "2",
                       "--verifier", "process", "--policy-version", "ckpt-3", "--out", str(tmp_path))
        assert server.stats["fault_429"] > 0
    summary = orjson.loads((tmp_path / "summary.json").read_bytes())
    assert summary["episodes"] == 12 and summary["mean_reward"] == 1.0 and summary["concurrency"] == 4
    records = [orjson.loads(line) for line in (tmp_path / "trajectories.jsonl").read_bytes().splitlines()]
    assert {r["policy"]["version"] for r in records} == {"ckpt-3"}
    groups = {r["extra"]["group"]["id"] for r in records}
    assert len(groups) == 6 and all(r["extra"]["group"]["size"] == 2 for r in records)
    assert "mean_reward" in proc.stdout


def test_eval_cli_rejects_a_bad_verifier_and_base_url_without_openai() -> None:
    bad = run_cli("eval", "proofgym/Arith-v0", "--verifier", "threads", check=False)
    assert bad.returncode != 0 and "process" in bad.stdout + bad.stderr
    stray = run_cli("eval", "proofgym/Arith-v0", "--base-url", "http://x/v1", check=False)
    assert stray.returncode != 0 and "openai:MODEL" in stray.stdout + stray.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_scripted_cli_serves_a_multi_turn_env_over_http() -> None:
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    server = subprocess.Popen([sys.executable, "-m", "proofgym", "serve-scripted", "proofgym/Guess-v0",
                               "--port", str(port), "--model", "guesser"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                models = httpx.get(f"{base_url}/models", timeout=1).json()
                break
            except httpx.TransportError:
                assert server.poll() is None, server.stdout.read()
                assert time.monotonic() < deadline, "serve-scripted did not start within 60 s"
                time.sleep(0.2)
        assert models["data"][0]["id"] == "guesser"
        policy = OpenAIPolicy("guesser", base_url=base_url)
        trajectories, summary = evaluate("proofgym/Guess-v0", policy, episodes=5, verifier="inline")
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert summary["mean_reward"] == 1.0 and summary["terminated_rate"] == 1.0
    # Binary search over HTTP: several turns, each a user message answered by the model.
    assert max(len(t.steps) for t in trajectories) >= 4
