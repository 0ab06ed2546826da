"""The run store: durable records, resume, torn-line repair, provenance on every record, re-grading."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium
import orjson
import pytest

from proofgym import (
    InProcessRuntime,
    Task,
    TaskSet,
    TaskSpec,
    Trace,
    TurnCompleteAction,
    UniversalVerifiableEnv,
)
from proofgym.core import ProofgymError
from proofgym.eval import evaluate, make_env, plan_episodes, run_plan
from proofgym.record import ContractError, RolloutContract, RunStore, RunStoreError, trajectory_id_for
from proofgym.rollout import ReferencePolicy, make_policy
from proofgym.verify.regrade import RegradeError, regrade_run
from tests.conftest import REPO

ARITH = "proofgym/Arith-v0"


def lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def check_records(run: Path, n_expected: int) -> list[dict]:
    """Every (task, attempt) exactly once; every record complete and carrying its provenance."""
    contract = RolloutContract.load(run)
    records = [orjson.loads(line) for line in lines(run / "trajectories.jsonl")]
    keys = [(r["task_id"], r["extra"]["attempt"]) for r in records]
    assert len(keys) == n_expected
    assert len(set(keys)) == n_expected, "an episode was recorded twice"
    for r in records:
        assert r["contract_id"] == contract.id
        assert r["task_hash"] and len(r["task_hash"]) == 16
        assert r["split"] in ("train", "dev", "heldout")
        assert r["trajectory_id"] == trajectory_id_for(contract.id, r["task_id"], r["extra"]["attempt"])
        assert r["artifact"] is not None
    return records


def test_records_carry_contract_task_hash_and_split(tmp_path: Path) -> None:
    run = tmp_path / "run"
    trajs, summary = evaluate(ARITH, ReferencePolicy(), episodes=12, out=run)
    records = check_records(run, 12)
    env = make_env(ARITH)
    for r in records:
        task = env.tasks.get(r["task_id"])
        assert r["task_hash"] == task.content_hash
        assert r["split"] == env.tasks.split_of(r["task_id"])
    assert {t.contract_id for t in trajs} == {summary["contract_id"]}
    assert orjson.loads((run / "summary.json").read_bytes())["episodes"] == 12
    assert orjson.loads((run / "splits.json").read_bytes())["tasks"].keys() == set(env.tasks.ids)


def test_in_memory_runs_carry_the_same_provenance() -> None:
    trajs, summary = evaluate(ARITH, ReferencePolicy(), episodes=5)
    env = make_env(ARITH)
    for t in trajs:
        assert t.contract_id == summary["contract_id"]
        assert t.split == env.tasks.split_of(t.task_id)
        assert t.trajectory_id == trajectory_id_for(t.contract_id, t.task_id, 0)
        assert t.task_hash == env.tasks.get(t.task_id).content_hash


def test_trajectory_ids_are_derived_not_random(tmp_path: Path) -> None:
    evaluate(ARITH, ReferencePolicy(), episodes=4, out=tmp_path / "a")
    evaluate(ARITH, ReferencePolicy(), episodes=4, out=tmp_path / "b")
    # Records are written in completion order (grading is out of band): compare the sets.
    ids = [sorted(orjson.loads(x)["trajectory_id"] for x in lines(tmp_path / d / "trajectories.jsonl"))
           for d in "ab"]
    assert ids[0] == ids[1] and len(ids[0]) == 4
    evaluate(ARITH, ReferencePolicy(), episodes=4, seed=1, out=tmp_path / "c")
    other = [orjson.loads(x)["trajectory_id"] for x in lines(tmp_path / "c" / "trajectories.jsonl")]
    assert not set(other) & set(ids[0]), "a different contract must give different ids"


def test_existing_run_is_never_overwritten(tmp_path: Path) -> None:
    evaluate(ARITH, ReferencePolicy(), episodes=3, out=tmp_path)
    before = (tmp_path / "trajectories.jsonl").read_bytes()
    with pytest.raises(RunStoreError, match=r"already holds a run.*--resume"):
        evaluate(ARITH, ReferencePolicy(), episodes=3, out=tmp_path)
    assert (tmp_path / "trajectories.jsonl").read_bytes() == before


def test_resume_with_a_different_contract_names_what_changed(tmp_path: Path) -> None:
    evaluate(ARITH, ReferencePolicy(), episodes=3, out=tmp_path)
    with pytest.raises(ContractError, match=r"policy\.name: 'reference' -> 'control:known_wrong'"):
        evaluate(ARITH, make_policy("control:known_wrong"), episodes=3, resume=tmp_path)
    with pytest.raises(ContractError, match=r"limits\.max_tool_calls: 8 -> 2"):
        evaluate(ARITH, ReferencePolicy(), episodes=3, resume=tmp_path,
                 env_kwargs={"max_tool_calls": 2})


def test_store_ignores_a_repeated_episode(tmp_path: Path) -> None:
    env = make_env(ARITH)
    contract = RolloutContract.build(env, policy={"name": "reference"}, env_id=ARITH)
    plan = plan_episodes(env.tasks.ids[:2])
    with RunStore.create(tmp_path, contract, manifest=env.tasks.manifest) as store:
        run_plan(env, ReferencePolicy(), plan, sink=store, contract_id=contract.id)
        run_plan(env, ReferencePolicy(), plan, sink=store, contract_id=contract.id)  # again
    assert len(lines(tmp_path / "trajectories.jsonl")) == 2


def test_concurrent_writers_each_record_exactly_once(tmp_path: Path) -> None:
    """Threads writing at once (as the orchestrator's sink may) share fsyncs; nothing is lost,
    torn or doubled, and every write returns only once its record is durable (in ``completed``)."""
    env = make_env(ARITH)
    contract = RolloutContract.build(env, policy={"name": "reference"}, env_id=ARITH)
    trajs = run_plan(env, ReferencePolicy(), plan_episodes(env.tasks.ids[:40], repeats=3),
                     contract_id=contract.id)
    store = RunStore.create(tmp_path, contract, manifest=env.tasks.manifest)
    returned_done = []

    def writer(chunk):
        for traj in chunk:
            store.write(traj)
            returned_done.append(traj.trajectory_id in store.completed)

    threads = [threading.Thread(target=writer, args=(trajs[i::8] + trajs[:3],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    store.close()
    assert all(returned_done)
    check_records(tmp_path, 120)
    assert store.completed == {t.trajectory_id for t in trajs}


def test_truncated_last_line_is_repaired_on_resume(tmp_path: Path) -> None:
    evaluate(ARITH, ReferencePolicy(), episodes=6, out=tmp_path)
    path = tmp_path / "trajectories.jsonl"
    good = lines(path)
    # simulate a crash in the middle of writing record 5: keep 4 whole lines and half of the 5th
    torn = good[4][: len(good[4]) // 2]
    path.write_bytes(b"".join(good[:4]) + torn)
    # reading tolerates it (and says so); resuming repairs it and re-runs only that episode
    assert len(RunStore.open(tmp_path).trajectories()) == 4
    _, summary = evaluate(ARITH, ReferencePolicy(), episodes=6, resume=tmp_path)
    assert summary["resumed_from"] == 4 and summary["episodes"] == 6
    after = lines(path)
    assert after[:4] == good[:4], "completed records must be kept byte for byte"
    assert torn in (tmp_path / "trajectories.jsonl.torn").read_bytes()
    records = check_records(tmp_path, 6)
    # grading is out of band, so records land in completion order: compare as sets
    assert sorted(r["task_id"] for r in records) == sorted(orjson.loads(x)["task_id"] for x in good)


def test_corruption_before_the_last_line_is_reported_not_dropped(tmp_path: Path) -> None:
    evaluate(ARITH, ReferencePolicy(), episodes=3, out=tmp_path)
    path = tmp_path / "trajectories.jsonl"
    good = lines(path)
    path.write_bytes(good[0] + b'{"trajectory_id": "oops\n' + good[2])
    with pytest.raises(RunStoreError, match=r"line 2 .*corruption"):
        evaluate(ARITH, ReferencePolicy(), episodes=3, resume=tmp_path)
    assert lines(path)[2] == good[2]


def _killed_run(args: list[str], run: Path, rng: random.Random) -> bool:
    """Start ``proofgym eval ARGS``, wait until it has written a random number of records, then
    SIGKILL it. Returns whether it was still running when killed."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "proofgym", *args], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    path = run / "trajectories.jsonl"
    start = len(lines(path)) if path.exists() else 0
    target = start + rng.randint(1, 60)
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        if path.exists() and path.stat().st_size and len(lines(path)) >= target:
            break
        time.sleep(0.005)
    time.sleep(rng.uniform(0, 0.05))  # land anywhere, including in the middle of a write
    alive = proc.poll() is None
    proc.send_signal(signal.SIGKILL)
    _, err = proc.communicate(timeout=30)
    assert alive or proc.returncode == 0, err.decode()
    return alive


@pytest.mark.slow
def test_sigkill_several_times_then_resume(tmp_path: Path) -> None:
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    run = tmp_path / "run"
    n = 240
    common = ["eval", ARITH, "-n", str(n), "--policy", "reference"]
    kills = 0
    snapshots: list[list[bytes]] = []
    for attempt in range(4):
        args = [*common, "--out", str(run)] if attempt == 0 else [*common, "--resume", str(run)]
        kills += _killed_run(args, run, rng)
        complete = [x for x in lines(run / "trajectories.jsonl") if x.endswith(b"\n")]
        snapshots.append(complete)
    assert kills >= 2, f"the runs finished before they could be killed (seed {seed})"
    proc = subprocess.run([sys.executable, "-m", "proofgym", *common, "--resume", str(run)],
                          env={**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    final = set(lines(run / "trajectories.jsonl"))
    for snap in snapshots:  # what was complete at each kill is still there, byte for byte
        assert set(snap) <= final
    records = check_records(run, n)
    assert all(r["reward"] == 1.0 for r in records), f"seed {seed}"
    summary = orjson.loads((run / "summary.json").read_bytes())
    assert summary["episodes"] == n and summary["mean_reward"] == 1.0


# ------------------------------------------------------------------ re-grading
@dataclass(frozen=True)
class EchoTask(Task):
    """Say the word. ``verify`` (version 2) wants it exactly; version 1 is kept for re-grading and
    ignores case; "broken" is a grader with a bug."""

    word: str
    verifier_version = "2"

    @property
    def id(self) -> str:
        return f"echo-{self.word}"

    def get_spec(self) -> TaskSpec:
        return TaskSpec(f"Say {self.word}.")

    def verify(self, trace: Trace, runtime: Any) -> float:
        return float(trace.final_message() == self.word)

    def verifiers(self):
        return {"1": lambda trace, runtime: float((trace.final_message() or "").lower() == self.word),
                "broken": lambda trace, runtime: 1 / 0}

    def reference_solution(self):
        return [TurnCompleteAction(self.word.upper())]


def make_echo_env() -> UniversalVerifiableEnv:
    return UniversalVerifiableEnv(InProcessRuntime([]), max_turns=1,
                                  tasks=TaskSet([EchoTask(w) for w in ("alpha", "beta", "gamma")],
                                                name="echo"))


gymnasium.register("proofgym-test/Echo-v0", entry_point=make_echo_env)


def test_regrade_with_another_named_version(tmp_path: Path) -> None:
    evaluate("proofgym-test/Echo-v0", ReferencePolicy(), out=tmp_path)  # says ALPHA: wrong for v2
    report = regrade_run(tmp_path, verifier_version="1")
    assert report.regraded == 3 and report.changed == 3
    assert report.old_mean == 0.0 and report.new_mean == 1.0
    broken = regrade_run(tmp_path)
    assert broken.changed == 0 and broken.new_mean == 0.0
    broken = regrade_run(tmp_path, verifier_version="broken")
    assert broken.errors == 3 and "ZeroDivisionError" in broken.records[0]["verdict"]["error"]
    assert broken.records[0]["verdict"]["status"] == "error"
    with pytest.raises(RegradeError, match=r"offers \['1', '2', 'broken'\]"):
        regrade_run(tmp_path, verifier_version="3")
    versions = [orjson.loads(x)["verifier_version"] for x in lines(tmp_path / "verdicts.jsonl")]
    assert versions == ["1"] * 3 + ["2"] * 3 + ["broken"] * 3
    # a torn line (left by an older, appending proofgym) is dropped; a re-grade of the same
    # version replaces the earlier one instead of adding a second verdict per episode
    with (tmp_path / "verdicts.jsonl").open("ab") as f:
        f.write(b'{"trajectory_id": "half')
    regrade_run(tmp_path, verifier_version="1")
    versions = [orjson.loads(x)["verifier_version"] for x in lines(tmp_path / "verdicts.jsonl")]
    assert versions == ["2"] * 3 + ["broken"] * 3 + ["1"] * 3
    assert len(RunStore.open(tmp_path).verdict_records()) == 9  # one per (episode, version)


def test_regrade_refuses_a_task_that_changed(tmp_path: Path) -> None:
    evaluate("proofgym-test/Echo-v0", ReferencePolicy(), out=tmp_path)
    changed = TaskSet([EchoTask("alpha"), EchoTask("beta"), EchoTask("gamma")], name="echo")
    record = orjson.loads(lines(tmp_path / "trajectories.jsonl")[0])
    record["task_hash"] = "0" * 16  # as if the task had been edited after the run
    rest = lines(tmp_path / "trajectories.jsonl")[1:]
    (tmp_path / "trajectories.jsonl").write_bytes(orjson.dumps(record) + b"\n" + b"".join(rest))
    report = regrade_run(tmp_path, tasks=changed)
    assert report.errors == 1 and "changed since the run" in report.records[0]["verdict"]["error"]


def test_regrade_of_an_unknown_env_is_a_clear_error(tmp_path: Path, cli) -> None:
    evaluate("proofgym-test/Echo-v0", ReferencePolicy(), out=tmp_path)  # registered in this process only
    proc = cli("verify", str(tmp_path), check=False)
    assert proc.returncode == 2 and "cannot rebuild env 'proofgym-test/Echo-v0'" in proc.stdout


def test_read_only_store_refuses_writes(tmp_path: Path) -> None:
    trajs, _ = evaluate(ARITH, ReferencePolicy(), episodes=1, out=tmp_path)
    store = RunStore.open(tmp_path)
    with pytest.raises(ProofgymError, match="read-only"):
        store.write(trajs[0])
