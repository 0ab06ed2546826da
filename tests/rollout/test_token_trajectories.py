"""Acceptance 4: token ids and log-probabilities from ``serve-scripted`` arrive in
``trajectories.jsonl`` and in ``export --format rl``; a multi-turn episode's token sequence is
exactly what the server returned; drift is reported, never papered over; stale episodes are
filtered by ``--max-off-policy-steps``."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import httpx
import orjson
import pytest

from proofgym import make_env
from proofgym.eval import evaluate
from proofgym.eval.export import export_records
from proofgym.eval.metrics import summarize
from proofgym.eval.report import write_report
from proofgym.rollout.openai_policy import OpenAIPolicy
from proofgym.testing import ReferenceScript, ScriptedServer
from proofgym.testing import tokens as scripted_tokens
from tests.conftest import REPO


def _run(env_id: str, server: ScriptedServer, *, version: str = "0", episodes: int = 3) -> list:
    policy = OpenAIPolicy("scripted", base_url=server.base_url, record_tokens=True, version=version)
    trajectories, _ = evaluate(env_id, policy, episodes=episodes, verifier="inline", split="dev")
    return trajectories


def test_the_scripted_server_returns_vllm_style_tokens_only_when_asked():
    with ScriptedServer(ReferenceScript(make_env("proofgym/Arith-v0").tasks)) as server:
        prompt = make_env("proofgym/Arith-v0").reset(seed=0)[0]["observation"]
        body = {"model": "scripted", "messages": [{"role": "user", "content": prompt}]}
        plain = httpx.post(f"{server.base_url}/chat/completions", json=body).json()
        assert "prompt_token_ids" not in plain and plain["choices"][0]["logprobs"] is None
        asked = httpx.post(f"{server.base_url}/chat/completions",
                           json={**body, "logprobs": True, "return_token_ids": True}).json()
        choice = asked["choices"][0]
        assert asked["prompt_token_ids"] == scripted_tokens.prompt_ids(body["messages"])
        assert choice["token_ids"] == scripted_tokens.completion_ids(choice["message"])
        content = choice["logprobs"]["content"]
        assert len(content) == len(choice["token_ids"]) and all(-7 < e["logprob"] < 0 for e in content)
        assert asked["usage"]["prompt_tokens"] == len(asked["prompt_token_ids"])


def test_serve_scripted_command_returns_token_ids():
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
    proc = subprocess.Popen([sys.executable, "-m", "proofgym", "serve-scripted", "proofgym/Arith-v0",
                             "--port", "0"], stdout=subprocess.PIPE, text=True, env=env)
    try:
        url = re.search(r"(http://\S+/v1)", proc.stdout.readline()).group(1)  # type: ignore[union-attr]
        prompt = make_env("proofgym/Arith-v0").reset(seed=0)[0]["observation"]
        reply = httpx.post(f"{url}/chat/completions", json={
            "model": "scripted", "messages": [{"role": "user", "content": prompt}],
            "logprobs": True, "return_token_ids": True}).json()
        assert reply["prompt_token_ids"][0] == scripted_tokens.SPECIAL["user"]
        assert reply["choices"][0]["token_ids"][-1] == scripted_tokens.END
    finally:
        proc.terminate()
        proc.wait(30)


def test_tokens_arrive_in_trajectories_jsonl_and_export_rl(tmp_path, cli):
    with ScriptedServer(ReferenceScript(make_env("proofgym/Arith-v0").tasks), record_requests=True) as server:
        run = tmp_path / "run"
        cli("eval", "proofgym/Arith-v0", "--policy", "openai:scripted", "--base-url", server.base_url,
            "--record-tokens", "--policy-version", "7", "-n", "2", "-c", "1", "--split", "dev",
            "--out", str(run))
        sent = list(server.sent or [])
    records = [orjson.loads(line) for line in (run / "trajectories.jsonl").read_bytes().splitlines()]
    calls = [s["usage"]["tokens"] for r in records for s in r["steps"] if "tokens" in s["usage"]]
    assert len(calls) == len(sent) == 4  # two episodes of two model calls each
    returned = {tuple(r["prompt_token_ids"]): r["choices"][0] for r in sent}
    for call in calls:
        choice = returned[tuple(call["prompt_ids"])]
        assert call["completion_ids"] == choice["token_ids"]
        assert call["logprobs"] == [e["logprob"] for e in choice["logprobs"]["content"]]
        assert call["loss_mask"] == [0] * len(call["prompt_ids"]) + [1] * len(call["completion_ids"])
    cli("export", str(run), "--format", "rl")
    exported = [orjson.loads(line) for line in (run / "export-rl.jsonl").read_bytes().splitlines()]
    assert len(exported) == 2
    for record in exported:
        assert record["reward"] == 1.0 and record["policy_version"] == "7" and record["drift"] is None
        last = record["calls"][-1]
        assert record["token_ids"] == last["prompt_ids"] + last["completion_ids"]
        assert len(record["loss_mask"]) == len(record["token_ids"]) == len(record["logprobs"])


def test_a_multi_turn_sequence_is_exactly_what_the_server_returned():
    with ScriptedServer(ReferenceScript(make_env("proofgym/Guess-v0").tasks), record_requests=True) as server:
        trajectories = _run("proofgym/Guess-v0", server, episodes=3)
        sent = list(server.sent or [])
    [record, *_] = [r for r in export_records(trajectories, "rl") if len(r["calls"]) >= 3]
    assert record["drift"] is None
    by_prompt = {tuple(r["prompt_token_ids"]): r for r in sent}
    # every call is the server's, token for token, and the sequence is their concatenation
    for call in record["calls"]:
        assert call["completion_ids"] == by_prompt[tuple(call["prompt_ids"])]["choices"][0]["token_ids"]
    ids, mask, generated = record["token_ids"], record["loss_mask"], []
    for k, call in enumerate(record["calls"]):
        assert ids[:len(call["prompt_ids"])] == call["prompt_ids"], f"call {k} re-tokenised"
        generated += call["completion_ids"]
    assert ids == record["calls"][-1]["prompt_ids"] + record["calls"][-1]["completion_ids"]
    assert [t for t, m in zip(ids, mask, strict=True) if m] == generated
    assert all(lp is None for lp, m in zip(record["logprobs"], mask, strict=True) if not m)


def test_drift_between_calls_is_reported_not_papered_over():
    # text tool calls: the client keeps the message without its <tool_call> block, so the next
    # prompt is not the tokens the model generated
    tasks = make_env("proofgym/Arith-v0").tasks
    with ScriptedServer(ReferenceScript(tasks), tool_call_format="text") as server:
        trajectories = _run("proofgym/Arith-v0", server, episodes=1)
    [record] = export_records(trajectories, "rl")
    assert record["token_ids"] is None and record["drift"]["call"] == 1
    assert len(record["calls"]) == 2 and record["calls"][1]["prompt_ids"]  # the calls stay exact


def test_max_off_policy_steps_filters_stale_episodes(tmp_path):
    with ScriptedServer(ReferenceScript(make_env("proofgym/Arith-v0").tasks)) as server:
        old = _run("proofgym/Arith-v0", server, version="1", episodes=2)
        new = _run("proofgym/Arith-v0", server, version="10", episodes=2)
    records = list(export_records(old + new, "rl", max_off_policy_steps=8))
    assert [(r["policy_version"], r["age"]) for r in records] == [("10", 0), ("10", 0)]
    aged = list(export_records(old + new, "rl", current_version=12))
    assert sorted(r["age"] for r in aged) == [2, 2, 11, 11]
    # the summary (and report.html) give the run's versions and ages against its newest
    assert summarize(old + new)["policy_versions"] == {"versions": {"1": 2, "10": 2}, "current": 10,
                                                       "max_age": 9, "mean_age": 4.5}
    page = write_report(tmp_path, trajectories=old + new, summary=summarize(old + new)).read_text()
    assert "age vs 10: max 9, mean 4.5 steps" in page
    from proofgym.core import ConfigError

    with pytest.raises(ConfigError, match="training step"):
        list(export_records([*old, *_run_named(server_version="v-final")], "rl", current_version=3))


def _run_named(server_version: str) -> list:
    with ScriptedServer(ReferenceScript(make_env("proofgym/Arith-v0").tasks)) as server:
        return _run("proofgym/Arith-v0", server, version=server_version, episodes=1)
