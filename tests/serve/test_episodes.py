"""The episode tier: whole episodes on the server against a model endpoint; the verdict comes
out of band (pending -> scored, or an unscored record with the reason: never a 0); cancel."""

from __future__ import annotations

import time
from urllib.parse import quote

import httpx
import pytest

from proofgym import make_env
from proofgym.testing import ReferenceScript, ScriptedServer
from tests.serve_helpers import Served

ENV = "proofgym/Arith-v0"


@pytest.fixture(scope="module")
def served():
    with Served(ENV, "--verifier", "inline") as server:
        yield server


def _ids(split: str, n: int) -> list[str]:
    tasks = make_env(ENV).tasks
    return [t for t in tasks.ids if tasks.split_of(t) == split][:n]


def _until(served: Served, trajectory_id: str, done) -> dict:
    deadline = time.monotonic() + 60
    while True:
        record = httpx.get(f"{served.url}/episodes/{quote(trajectory_id, safe='')}", params={"wait": 5},
                           timeout=30).json()
        if done(record):
            return record
        assert time.monotonic() < deadline, record
        time.sleep(0.05)


def test_episodes_run_on_the_server_and_their_verdicts_come_out_of_band(served):
    tasks = make_env(ENV).tasks
    with ScriptedServer(ReferenceScript(tasks)) as model, \
            ScriptedServer(ReferenceScript(tasks, lambda t: t.controls()["known_wrong"])) as wrong:
        started = {}
        for task_id in _ids("train", 3):
            for name, endpoint in (("reference", model), ("wrong", wrong)):
                reply = httpx.post(f"{served.url}/episodes", json={
                    "task_id": task_id, "seed": 1,
                    "model": {"base_url": endpoint.base_url, "model": "scripted", "version": "3"}})
                assert reply.status_code == 202 and reply.json()["verdict"]["status"] == "pending"
                started[reply.json()["trajectory_id"]] = (task_id, name)
        for trajectory_id, (task_id, name) in started.items():
            record = _until(served, trajectory_id, lambda r: r["verdict"]["status"] not in ("pending",))
            assert record["state"] == "done" and record["task_id"] == task_id
            verdict = record["verdict"]
            assert verdict["status"] == "scored" and verdict["verifier_version"] == "arith-1"
            assert verdict["verdict"]["reward"] == (1.0 if name == "reference" else 0.0)
            traj = record["trajectory"]
            assert traj["trajectory_id"] == trajectory_id and traj["policy"]["version"] == "3"
            assert traj["steps"] and "artifact" not in traj  # the final state stays on the server
            # the same verdict record, keyed by trajectory id and verifier version
            by_id = httpx.get(f"{served.url}/verdicts/{quote(trajectory_id, safe='')}",
                              params={"version": "arith-1"}).json()
            assert by_id["verdict"] == verdict["verdict"]


def test_a_cancelled_or_failed_episode_is_unscored_never_a_zero(served):
    tasks = make_env(ENV).tasks
    task_id = _ids("train", 1)[0]
    with ScriptedServer(ReferenceScript(tasks), latency_s=30) as slow:
        reply = httpx.post(f"{served.url}/episodes", json={
            "task_id": task_id, "model": {"base_url": slow.base_url, "model": "scripted"}}).json()
        time.sleep(0.3)
        cancelled = httpx.post(f"{served.url}/episodes/{quote(reply['trajectory_id'], safe='')}/cancel",
                               timeout=60).json()
    assert cancelled["state"] == "cancelled"
    assert cancelled["verdict"] == {"status": "unscored", "reason": "cancelled by the client"}
    # a model endpoint that is not there: the episode fails, recorded as such, unscored
    failed = httpx.post(f"{served.url}/episodes", json={
        "task_id": task_id, "model": {"base_url": "http://127.0.0.1:9/v1", "model": "scripted",
                                      "sampling": {}}}).json()
    record = _until(served, failed["trajectory_id"], lambda r: r["state"] != "running")
    assert record["state"] == "failed" and record["verdict"]["status"] == "unscored"
    assert "model server" in record["reason"]


def test_bad_requests_and_the_held_out_guard(served):
    assert httpx.post(f"{served.url}/episodes", json={"model": {}}).status_code == 422
    no_model = httpx.post(f"{served.url}/episodes", json={"task_id": _ids("train", 1)[0]})
    assert no_model.status_code == 422 and "base_url" in no_model.json()["error"]["message"]
    unknown = httpx.post(f"{served.url}/episodes", json={
        "task_id": "no-such-task", "model": {"base_url": "http://127.0.0.1:9/v1", "model": "m"}})
    assert unknown.status_code == 409 and "no-such-task" in unknown.json()["error"]["message"]
    held = httpx.post(f"{served.url}/episodes", json={
        "task_id": _ids("heldout", 1)[0], "model": {"base_url": "http://127.0.0.1:9/v1", "model": "m"}})
    assert held.status_code == 403 and held.json()["error"]["code"] == "HELD_OUT"
