"""Plain resets of a served env: a seeded reset without a task id draws a task the server may
serve (train, unless the client allows held-out tasks), a refused reset holds no session, a
malformed frame gets the error frame OpenEnv's server sends, and ``RemoteEnv`` pickles by
reconnecting (so an async vector env can hold it).

Arith is the cheapest bundled env with held-out tasks (400 tasks: 10% held out, 10% dev; its
runtime runs in the server's process), so the thousand resets run on it; the RepoRepair server
test checks the recipe's held-out projects without starting a sandbox (a refused reset starts
none)."""

from __future__ import annotations

import pickle
import time

import gymnasium
import httpx
import orjson
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

import proofgym.remote  # noqa: F401 - registers Remote-v0
from proofgym import make_env
from proofgym.remote import RemoteEnv
from proofgym.serve import SESSION_HEADER
from tests.serve_helpers import Served

ENV = "proofgym/Arith-v0"


@pytest.fixture(scope="module")
def arith():
    """A default Arith server but for its capacity: two sessions, so a leaked one shows at once."""
    with Served(ENV, "--verifier", "inline", "--max-sessions", "2") as served:
        yield served


def _splits(served: Served) -> dict[str, str]:
    return {t["task_id"]: t["split"] for t in httpx.get(f"{served.url}/tasks").json()["tasks"]}


def _active(served: Served) -> int:
    return httpx.get(f"{served.url}/health").json()["active_sessions"]


def test_a_thousand_seeded_resets_succeed_on_train_tasks_and_leave_no_session(arith):
    """1,000 seeded resets without a task id, each session closed after it: every one succeeds
    on a train task (the local env's draw of the seed whenever that is one), none meets
    CAPACITY_REACHED on a two-session server, and no session is left open."""
    splits = _splits(arith)
    assert {"heldout", "dev"} <= set(splits.values())
    local = make_env(ENV)
    drawn, same_as_local, train_draws = {}, 0, 0
    with httpx.Client(base_url=arith.url) as http:
        for seed in range(1000):
            reset = http.post("/reset", json={"seed": seed})
            assert reset.status_code == 200, (seed, reset.text)
            task_id = reset.json()["info"]["task_id"]
            drawn[seed] = task_id
            closed = http.post("/close", headers={SESSION_HEADER: reset.headers[SESSION_HEADER]})
            assert closed.status_code == 200
            if seed % 10 == 0:  # the local env's draw, on a sample of the seeds
                local_task = local.reset(seed=seed)[1]["task_id"]
                train_draws += splits[local_task] == "train"
                same_as_local += local_task == task_id
        assert {splits[t] for t in drawn.values()} == {"train"}
        assert same_as_local == train_draws > 50  # the local draw is kept whenever it is a train task
        again = http.post("/reset", json={"seed": 7})  # a seed names its task
        assert again.json()["info"]["task_id"] == drawn[7]
        http.post("/close", headers={SESSION_HEADER: again.headers[SESSION_HEADER]})
    local.close()
    assert _active(arith) == 0


def test_a_refused_reset_holds_no_session(arith):
    """Held-out task ids without allow_heldout, malformed resets: each refused, none leaves a
    session behind, so a two-session server still has room for a client that closes its own."""
    held = next(t for t, s in _splits(arith).items() if s == "heldout")
    refused = [({"options": {"task_id": held}}, 403, "HELD_OUT"),
               ([1, 2], 422, "VALIDATION_ERROR"),
               ({"seed": "x"}, 422, "VALIDATION_ERROR"),
               ({"task_id": 5}, 422, "VALIDATION_ERROR"),
               ({"allow_heldout": "yes", "task_id": held}, 422, "VALIDATION_ERROR"),
               ({"options": {"task_id": "no-such-task"}}, 409, "EXECUTION_ERROR")]
    with httpx.Client(base_url=arith.url) as http:
        for _ in range(5):
            for body, status, code in refused:
                answer = http.post("/reset", json=body)
                assert (answer.status_code, answer.json()["error"]["code"]) == (status, code), body
                assert SESSION_HEADER not in answer.headers
        assert _active(arith) == 0
        ok = http.post("/reset", json={"seed": 1})
        assert ok.status_code == 200
        http.post("/close", headers={SESSION_HEADER: ok.headers[SESSION_HEADER]})
    assert _active(arith) == 0


def _ask(ws, frame: str | bytes) -> dict:
    ws.send(frame)
    return orjson.loads(ws.recv(timeout=30))


def test_malformed_frames_get_openenv_error_frames(arith):
    """The codes OpenEnv's server (openenv.core.env_server.http_server) answers: a frame that is
    not JSON is INVALID_JSON, an unknown type UNKNOWN_TYPE, a frame its message model rejects
    (data not an object, a field the type does not take) VALIDATION_ERROR; the session goes on.
    A binary frame ends the session with SESSION_ERROR, as OpenEnv's does (here with close code
    1003 and no traceback in the server's log)."""
    ws = connect(f"{arith.ws_url}/ws").__enter__()
    try:
        cases = [("not json", "INVALID_JSON"),
                 ('{"type": "reset", "data": [1, 2]}', "VALIDATION_ERROR"),
                 ('{"type": "reset", "data": null}', "VALIDATION_ERROR"),
                 ('{"type": "reset", "data": {}, "extra": 1}', "VALIDATION_ERROR"),
                 ('{"type": "step", "data": "x"}', "VALIDATION_ERROR"),
                 ('{"type": "step"}', "VALIDATION_ERROR"),
                 ('{"type": "state", "data": {}}', "VALIDATION_ERROR"),
                 ('[1, 2]', "VALIDATION_ERROR"),
                 ('{"type": ["reset"]}', "UNKNOWN_TYPE"),
                 ('{"type": "launch"}', "UNKNOWN_TYPE")]
        for frame, code in cases:
            answer = _ask(ws, frame)
            assert answer["type"] == "error" and answer["data"]["code"] == code, (frame, answer)
        assert _ask(ws, '{"type": "reset", "data": {"seed": 2}}')["type"] == "observation"
        answer = _ask(ws, b'{"type": "reset"}')
        assert answer["type"] == "error" and answer["data"]["code"] == "SESSION_ERROR"
        assert "binary" in answer["data"]["message"]
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=30)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1003
    finally:
        ws.close()
    deadline = time.monotonic() + 10
    while _active(arith):
        assert time.monotonic() < deadline, "the binary frame's session was never closed"
        time.sleep(0.05)
    assert "Traceback" not in arith.output


def test_remote_env_pickles_by_reconnecting_and_runs_in_an_async_vector_env(arith):
    env = RemoteEnv(arith.url)
    try:
        env.reset(seed=0)
        copy = pickle.loads(pickle.dumps(env))
        try:
            assert copy.session_id is None and copy.url == env.url
            _, info = copy.reset(seed=0)
            assert copy.session_id not in (None, env.session_id)  # a session of its own
            assert info["task_id"] == env.reset(seed=0)[1]["task_id"]
        finally:
            copy.close()
    finally:
        env.close()
    vec = gymnasium.make_vec("proofgym.remote:Remote-v0", num_envs=2, vectorization_mode="async",
                             url=arith.url)
    try:
        splits = _splits(arith)
        for seed in range(0, 40, 2):  # Gymnasium's plain seeded resets: never refused as held out
            _, infos = vec.reset(seed=seed)
            assert {splits[t] for t in infos["task_id"]} == {"train"}
        assert all(isinstance(e, RemoteEnv) for e in vec.get_attr("unwrapped"))  # pickled back
    finally:
        vec.close()


def test_a_served_repo_repair_env_refuses_every_task_of_a_held_out_project():
    """Serving the bundled RepoRepair set: /tasks lists every task of a held-out project as
    heldout, and a reset on one without allow_heldout is refused before any sandbox starts."""
    from tests.envs.test_repo_repair_splits import _held_out_ids

    held = _held_out_ids()
    with Served("proofgym/RepoRepair-v0", "--max-sessions", "1") as served:
        splits = _splits(served)
        assert {t for t, s in splits.items() if s == "heldout"} == held
        # one task of each held-out project: each refused reset opens and closes a session's env
        one_per_project = {t.rsplit("-", 1)[0]: t for t in sorted(held)}.values()
        with httpx.Client(base_url=served.url, timeout=60) as http:
            for task_id in one_per_project:
                answer = http.post("/reset", json={"options": {"task_id": task_id}})
                assert answer.status_code == 403 and answer.json()["error"]["code"] == "HELD_OUT"
            assert http.get("/health").json()["active_sessions"] == 0
            assert http.get("/splits").json()["burned"] == {}
