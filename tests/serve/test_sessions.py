"""Session hygiene of ``proofgym serve``: HTTP sessions by header, /health, capacity, the idle
reaper, the held-out guard, tokens off loopback, and no hidden data in errors or verdicts."""

from __future__ import annotations

import time
from urllib.parse import quote

import httpx
import orjson
import pytest
from websockets.sync.client import connect

from proofgym import TurnCompleteAction, make_env
from proofgym.core import ConfigError
from proofgym.remote import RemoteEnv, RemoteError
from proofgym.serve import SESSION_HEADER, ServeConfig, build
from proofgym.tasks import HeldOutError
from tests.serve.secret_env import SECRET
from tests.serve_helpers import Served

ENV = "proofgym/Arith-v0"


@pytest.fixture(scope="module")
def small():
    """An Arith server with room for two sessions, reaping after 1.5 s idle."""
    with Served(ENV, "--verifier", "inline", "--max-sessions", "2", "--idle-timeout", "1.5") as served:
        yield served


def _ws(url: str, **headers: str):
    return connect(f"{url}/ws", additional_headers=headers).__enter__()


def _ask(ws, message: dict) -> dict:
    ws.send(orjson.dumps(message).decode())
    return orjson.loads(ws.recv(timeout=30))


def test_http_sessions_are_named_by_a_header(small):
    with httpx.Client(base_url=small.url) as http:
        first = http.post("/reset", json={"seed": 3})
        assert first.status_code == 200
        session = first.headers[SESSION_HEADER]
        assert first.json()["metadata"]["session_id"] == session
        served_task = first.json()["info"]["task_id"]
        assert first.json()["observation"] == make_env(ENV).reset(seed=3, options={"task_id": served_task})[0]
        step = http.post("/step", json={"action": {"message": "\\boxed{0}"}},
                         headers={SESSION_HEADER: session}).json()
        assert step["done"] and step["terminated"] and step["verdict"]["status"] == "scored"
        state = http.get("/state", headers={SESSION_HEADER: session}).json()
        assert state["step_count"] == 1 and state["verdict_status"] == "scored"
        assert http.post("/close", headers={SESSION_HEADER: session}).status_code == 200
        gone = http.post("/step", json={"message": "x"}, headers={SESSION_HEADER: session})
        assert gone.status_code == 404 and gone.json()["error"]["code"] == "NOT_FOUND"
        health = http.get("/health").json()
        assert health["status"] == "healthy" and health["active_sessions"] == 0


def test_capacity_is_a_typed_error_and_frees_when_a_session_ends(small):
    a, b = _ws(small.ws_url), _ws(small.ws_url)
    try:
        assert _ask(a, {"type": "reset", "data": {"seed": 1}})["type"] == "observation"
        assert _ask(b, {"type": "reset", "data": {"seed": 2}})["type"] == "observation"
        third = _ws(small.ws_url)
        refused = orjson.loads(third.recv(timeout=30))
        assert refused["type"] == "error" and refused["data"]["code"] == "CAPACITY_REACHED"
        assert refused["data"]["max_sessions"] == 2
        third.close()
        over = httpx.post(f"{small.url}/reset", json={})
        assert over.status_code == 503 and over.headers["Retry-After"] == "1"
    finally:
        a.close()
    deadline = time.monotonic() + 10
    while httpx.get(f"{small.url}/health").json()["active_sessions"] > 1:
        assert time.monotonic() < deadline, "a closed connection's session was never freed"
        time.sleep(0.05)
    c = _ws(small.ws_url)
    assert _ask(c, {"type": "reset", "data": {"seed": 3}})["type"] == "observation"
    c.close()
    b.close()
    _free(small)  # the next test finds room


def _free(served: Served) -> None:
    deadline = time.monotonic() + 10
    while httpx.get(f"{served.url}/health").json()["active_sessions"]:
        assert time.monotonic() < deadline, "closed sessions were never freed"
        time.sleep(0.05)


def test_an_idle_http_session_is_reaped(small):
    _free(small)
    reset = httpx.post(f"{small.url}/reset", json={"seed": 4})
    session = reset.headers[SESSION_HEADER]
    before = httpx.get(f"{small.url}/health").json()["reaped"]
    deadline = time.monotonic() + 15
    while httpx.get(f"{small.url}/health").json()["reaped"] == before:
        assert time.monotonic() < deadline, "the idle session was never reaped"
        time.sleep(0.2)
    late = httpx.post(f"{small.url}/step", json={"message": "x"}, headers={SESSION_HEADER: session})
    assert late.status_code == 404 and "reaped" in late.json()["error"]["message"]


def test_the_held_out_guard_needs_the_flag_and_burns_the_task(small):
    _free(small)
    tasks = make_env(ENV).tasks
    held = next(t for t in tasks.ids if tasks.split_of(t) == "heldout")
    env = RemoteEnv(small.url)
    try:
        with pytest.raises(HeldOutError, match="allow_heldout"):
            env.reset(options={"task_id": held})
        assert httpx.get(f"{small.url}/splits").json()["burned"] == {}
        env.allow_heldout = True
        _, info = env.reset(options={"task_id": held})
        assert info["task_id"] == held
        splits = httpx.get(f"{small.url}/splits").json()
        assert splits["burned"][held]["was"] == "heldout"
        assert [b["task_id"] for b in splits["burns"]] == [held]
        listed = {t["task_id"]: t["split"] for t in httpx.get(f"{small.url}/tasks").json()["tasks"]}
        assert listed[held] == "burned"
        assert "prompt" not in str(httpx.get(f"{small.url}/tasks").json())  # ids and hashes only
    finally:
        env.close()


def test_a_training_server_refuses_held_out_tasks_outright():
    with Served(ENV, "--verifier", "inline", "--split", "train") as served:
        tasks = make_env(ENV).tasks
        held = next(t for t in tasks.ids if tasks.split_of(t) == "heldout")
        env = RemoteEnv(served.url, allow_heldout=True)
        try:
            with pytest.raises(HeldOutError, match="refusing to train"):
                env.reset(options={"task_id": held})
        finally:
            env.close()


def test_no_hidden_data_in_errors_or_verdicts():
    with Served("tests.serve.secret_env:Secret-v0", "--verifier", "inline") as served:
        env = RemoteEnv(served.url)
        try:
            with pytest.raises(RemoteError) as failed:
                env.reset(options={"task_id": "broken-setup"})
            assert SECRET not in str(failed.value) and "ref " in str(failed.value)
            env.reset(options={"task_id": "broken-grader"})
            env.step(TurnCompleteAction("no"))
            verdict = env.verify([])
            assert verdict.status == "error" and SECRET not in str(verdict.to_dict())
            record = httpx.get(f"{served.url}/verdicts/{quote(env.episode_id, safe='')}").text
            assert SECRET not in record and "withheld" in record
            described = httpx.get(f"{served.url}/describe").text
            assert "answer it" not in described  # task content never leaves the server
        finally:
            env.close()
        served.stop()
        assert SECRET in served.output  # withheld from the client, kept in the server's log


def test_binding_beyond_loopback_needs_a_token():
    with pytest.raises(ConfigError, match="--token"):
        build(ServeConfig(ENV, host="0.0.0.0"))
    build(ServeConfig(ENV, host="0.0.0.0", token="s3cret", verifier="inline"))[1].verdicts.close()


def test_a_token_is_required_when_set():
    with Served(ENV, "--verifier", "inline", "--token", "s3cret") as served:
        assert httpx.get(f"{served.url}/health").status_code == 200  # health stays open
        assert httpx.post(f"{served.url}/reset", json={}).status_code == 401
        ws = _ws(served.ws_url)
        assert orjson.loads(ws.recv(timeout=30))["data"]["code"] == "UNAUTHORIZED"
        ws.close()
        with pytest.raises(RemoteError, match="401"):
            RemoteEnv(served.url, token="wrong")
        env = RemoteEnv(served.url, token="s3cret")
        try:
            assert env.reset(seed=0)[0]["type"] == "turn_init"
        finally:
            env.close()


def test_a_missing_serve_extra_names_the_install_command(monkeypatch):
    import sys

    from proofgym.cli.serve_cmd import require_serve_extra
    from proofgym.tasks import MissingExtraError

    require_serve_extra()  # installed here
    monkeypatch.setitem(sys.modules, "uvicorn", None)  # as if it were not
    with pytest.raises(MissingExtraError, match=r"needs uvicorn: pip install 'proofgym\[serve\]'"):
        require_serve_extra()


def test_burns_are_written_into_the_served_split_manifest(tmp_path, cli):
    manifest = tmp_path / "splits.json"
    cli("splits", "freeze", ENV, "--out", str(manifest))
    entries = orjson.loads(manifest.read_bytes())["tasks"]
    held = next(t for t, e in entries.items() if e["split"] == "heldout")
    with Served(ENV, "--verifier", "inline", "--splits", str(manifest)) as served:
        env = RemoteEnv(served.url, allow_heldout=True)
        try:
            env.reset(options={"task_id": held})
        finally:
            env.close()
    burned = orjson.loads(manifest.read_bytes())["burned"]
    assert list(burned) == [held] and burned[held]["was"] == "heldout"  # it outlives the server
    assert f"burned held-out task {held}" in served.output
    assert held in cli("splits", "show", str(manifest)).stdout
