"""Issue 11: one run directory reader/writer: lock, duplicate rule, re-grades replace, shapes,
count vs plan, retries of infrastructure errors, full disk."""

from __future__ import annotations

import math
import socket
from pathlib import Path

import orjson
import pytest

from proofgym import Verdict
from proofgym.errors import RunFailedError
from proofgym.eval import evaluate, load_run, make_env
from proofgym.record import MAX_ATTEMPTS, RolloutContract, RunStore, RunStoreError, Trajectory
from proofgym.rollout import OpenAIPolicy, ReferencePolicy
from proofgym.testing import ReferenceScript, ScriptedServer

ARITH = "proofgym/Arith-v0"


def records(path: Path) -> list[dict]:
    return [orjson.loads(x) for x in (path / "trajectories.jsonl").read_bytes().splitlines() if x.strip()]


def contract() -> RolloutContract:
    return RolloutContract.build(make_env(ARITH), policy={"name": "reference", "version": "1"}, env_id=ARITH)


def test_a_second_writer_on_a_locked_run_directory_is_refused(tmp_path: Path) -> None:
    first = RunStore.create(tmp_path / "run", contract())
    try:
        with pytest.raises(RunStoreError, match="being written by another proofgym process"):
            RunStore.resume(tmp_path / "run", contract())
        with pytest.raises(RunStoreError, match="being written"):
            RunStore.create(tmp_path / "run", contract())
    finally:
        first.close()
    RunStore.resume(tmp_path / "run", contract()).close()  # released on close


def test_verify_twice_leaves_one_verdict_per_episode(cli, tmp_path: Path) -> None:
    evaluate(ARITH, ReferencePolicy(), episodes=3, out=tmp_path, verifier="inline")
    cli("verify", str(tmp_path))
    cli("verify", str(tmp_path))
    verdicts = [orjson.loads(x) for x in (tmp_path / "verdicts.jsonl").read_bytes().splitlines()]
    assert len(verdicts) == 3 == len({v["trajectory_id"] for v in verdicts})


@pytest.mark.parametrize("command", [["report"], ["export"], ["verify"],
                                     ["eval", ARITH, "-n", "3", "--resume"]])
def test_a_record_of_the_wrong_shape_is_named_not_a_traceback(cli, tmp_path: Path, command) -> None:
    evaluate(ARITH, ReferencePolicy(), episodes=3, out=tmp_path, verifier="inline")
    with (tmp_path / "trajectories.jsonl").open("ab") as f:
        f.write(b'{"hello": "world"}\n')
    proc = cli(*command, str(tmp_path), check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "Traceback" not in out
    assert "not a trajectory record" in out and "trajectory_id" in out


def test_a_deleted_record_is_noticed(cli, tmp_path: Path) -> None:
    evaluate(ARITH, ReferencePolicy(), episodes=4, out=tmp_path, verifier="inline")
    path = tmp_path / "trajectories.jsonl"
    path.write_bytes(b"".join(path.read_bytes().splitlines(keepends=True)[:3]))
    assert load_run(tmp_path).missing == 1
    assert "1 planned episodes have no record" in cli("report", str(tmp_path)).stdout


def test_two_finished_records_of_one_episode_are_corruption(tmp_path: Path) -> None:
    evaluate(ARITH, ReferencePolicy(), episodes=2, out=tmp_path, verifier="inline")
    path = tmp_path / "trajectories.jsonl"
    path.write_bytes(path.read_bytes() + path.read_bytes().splitlines(keepends=True)[0])
    with pytest.raises(RunStoreError, match="repeats the finished trajectory"):
        load_run(tmp_path)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_resume_reruns_infrastructure_errors_until_every_episode_is_scored(tmp_path: Path) -> None:
    port = _free_port()
    url = f"http://127.0.0.1:{port}/v1"

    def policy() -> OpenAIPolicy:
        return OpenAIPolicy("scripted", base_url=url, max_retries=0, timeout_s=5)

    with pytest.raises(RunFailedError) as failed:  # nothing listening: the run fails as a whole
        evaluate(ARITH, policy(), episodes=4, out=tmp_path, verifier="inline")
    down = failed.value.summary
    assert down["episodes"] == 4 and all(r["status"] == "error" for r in records(tmp_path))
    with ScriptedServer(ReferenceScript(make_env(ARITH).tasks), port=port):
        _, up = evaluate(ARITH, policy(), episodes=4, resume=tmp_path, verifier="inline")
    assert up["episodes"] == 4 and up["mean_reward"] == 1.0
    every = records(tmp_path)
    assert len(every) == 8  # each attempt is recorded
    assert sorted(t.status for t in load_run(tmp_path).trajectories) == ["ok"] * 4
    assert MAX_ATTEMPTS >= 2


def test_full_disk_is_one_clear_error(tmp_path: Path) -> None:
    full = Path("/dev/full")
    if not full.exists():
        pytest.skip("/dev/full is not available")
    store = RunStore.create(tmp_path / "run", contract())
    try:
        store._file = full.open("ab")  # the store's own file handle, pointed at a full device
        traj = evaluate(ARITH, ReferencePolicy(), episodes=1, verifier="inline")[0][0]
        with pytest.raises(RunStoreError, match="is full"):
            store.write(traj)
    finally:
        store.close()


def test_nan_in_verdict_components_is_rejected_when_made() -> None:
    with pytest.raises(ValueError, match="finite"):
        Verdict(1.0, components={"a": math.nan})
    with pytest.raises(ValueError, match="finite"):
        Verdict(1.0, metrics={"m": math.inf})


def test_verdict_from_dict_ignores_fields_a_newer_version_adds() -> None:
    data = {**Verdict(0.5, components={"a": 0.5}).to_dict(), "calibration": {"x": 1}}
    assert Verdict.from_dict(data) == Verdict(0.5, components={"a": 0.5})


def test_killing_the_model_server_mid_run_then_resuming_scores_every_episode(tmp_path: Path) -> None:
    port = _free_port()
    url = f"http://127.0.0.1:{port}/v1"
    tasks = make_env(ARITH).tasks
    seen: list[Trajectory] = []

    def policy() -> OpenAIPolicy:
        return OpenAIPolicy("scripted", base_url=url, max_retries=0, timeout_s=5)

    server = ScriptedServer(ReferenceScript(tasks), port=port, latency_s=0.02).start()

    def kill_after_three(traj: Trajectory) -> None:
        seen.append(traj)
        if len(seen) == 3:
            server.stop()  # the model server dies mid-run

    # the errors are the point here: no error budget fails the first run
    _, first = evaluate(ARITH, policy(), episodes=12, out=tmp_path, verifier="inline",
                        on_episode=kill_after_three, max_error_rate=None)
    assert first["episodes"] == 12 and 0 < first["episode_errors"] < 12
    with ScriptedServer(ReferenceScript(tasks), port=port):  # restarted
        _, resumed = evaluate(ARITH, policy(), episodes=12, resume=tmp_path, verifier="inline")
    assert resumed["episodes"] == 12 and resumed["mean_reward"] == 1.0 and resumed["episode_errors"] == 0
    assert len(records(tmp_path)) == 12 + first["episode_errors"]  # every attempt recorded


def test_one_stamper_derives_ids_under_a_contract_and_keeps_a_named_one_without(tmp_path: Path) -> None:
    from proofgym.record import stamp, trajectory_id_for

    def blank(tid: str) -> Trajectory:
        return Trajectory(trajectory_id=tid, env_id="", task_id="t-1", task_hash="", seed=0, policy={},
                          prompt="", tools=[])

    named = stamp(blank("my-episode"), None, attempt=2)
    assert (named.trajectory_id, named.contract_id, named.extra["attempt"]) == ("my-episode", None, 2)
    under = stamp(blank("my-episode"), "c0ffee", attempt=2, split="dev")
    assert under.trajectory_id == trajectory_id_for("c0ffee", "t-1", 2) == "c0ffee/t-1#2"
    assert (under.contract_id, under.split) == ("c0ffee", "dev")
    assert trajectory_id_for(None, "t-1", 2) == trajectory_id_for("", "t-1", 2) == "t-1#2"
    # the store stamps with the same function: a record's id is the derived one, whatever it was
    store = RunStore.create(tmp_path / "run", contract())
    try:
        traj = blank("anything")
        traj.extra["attempt"] = 1
        store.write(traj)
    finally:
        store.close()
    (record,) = records(tmp_path / "run")
    assert record["trajectory_id"] == trajectory_id_for(contract().id, "t-1", 1)


def test_the_summary_is_computed_once_and_report_shows_what_eval_wrote(tmp_path: Path) -> None:
    from proofgym.eval import summary_of

    _, summary = evaluate(ARITH, ReferencePolicy(), episodes=4, out=tmp_path, verifier="inline")
    on_disk = orjson.loads((tmp_path / "summary.json").read_bytes())
    assert on_disk == orjson.loads(orjson.dumps(summary))
    # report's numbers come from the same function over the records eval wrote: identical
    assert orjson.loads(orjson.dumps(summary_of(load_run(tmp_path)))) == on_disk
    # a killed run has no summary.json: the same function gives its numbers, the plan unknown
    (tmp_path / "summary.json").unlink()
    partial = summary_of(load_run(tmp_path))
    assert partial["episodes"] == 4 and partial["mean_reward"] == on_disk["mean_reward"]
    assert "planned" not in partial
