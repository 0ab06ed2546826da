"""The Ray backends against a real local cluster: a head and two worker nodes (``num_cpus=1``
each), one cluster for the module. Env slots in Ray actors, graders in Ray actors, a node killed
mid-run, and a clean shutdown."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from tests.conftest import REPO, require_tool
from tests.ray_helpers import (
    actors_on,
    bwrap_under,
    comparable,
    kill_node,
    live_actors,
    make_cluster,
    mounts_under,
    records,
    require_ray,
)

# one local Ray cluster at a time on this machine (the docs' scaling-out page starts another)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]


@pytest.fixture(scope="module")
def cluster():
    require_ray()
    tmpdir = os.environ.get("TMPDIR")
    cluster = make_cluster(workers=2)
    yield cluster
    import ray

    ray.shutdown()
    cluster.shutdown()
    if tmpdir is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = tmpdir


def test_arith_on_ray_matches_local(cluster, tmp_path):
    from proofgym.eval import evaluate
    from proofgym.rollout import ReferencePolicy
    from proofgym.rollout.ray_slots import RaySlots

    kwargs = {"episodes": 6, "seed": 3, "concurrency": 3}
    local, local_summary = evaluate("proofgym/Arith-v0", ReferencePolicy(), verifier="inline",
                                    out=tmp_path / "local", **kwargs)
    slots = RaySlots(cpus_per_slot=0.25, slots_per_node=1)
    # graded inline here (the CodeRepair test below grades on Ray): the slots are what differs
    remote, ray_summary = evaluate("proofgym/Arith-v0", ReferencePolicy(), backend=slots, verifier="inline",
                                   out=tmp_path / "ray", **kwargs)
    assert ray_summary["mean_reward"] == 1.0
    assert comparable(ray_summary) == comparable(local_summary)
    # the same records, and each says where it ran
    assert sorted(t.trajectory_id for t in remote) == sorted(t.trajectory_id for t in local)
    assert {t.extra["rollout"]["backend"] for t in remote} == {"ray"}
    assert remote[0].extra["rollout"]["cluster"]["nodes"] == 3
    assert {t.extra["rollout"]["backend"] for t in local} == {"local"}
    assert live_actors() == []


def test_code_repair_cli_on_ray_scores_one_and_matches_local(cluster, tmp_path, cli):
    """Acceptance 2: `proofgym eval proofgym/CodeRepair-v0 --policy reference --backend ray`."""
    require_tool("bwrap")
    env = {"RAY_ADDRESS": cluster.address}
    args = ["eval", "proofgym/CodeRepair-v0", "--policy", "reference", "-n", "2", "-c", "2"]
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        cli(*args, "--out", str(tmp_path / "local"))
        proc = cli(*args, "--out", str(tmp_path / "ray"), "--backend", "ray", "--cpus-per-slot", "0.5")
    finally:
        for k, v in old.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    local = json.loads((tmp_path / "local" / "summary.json").read_text())
    remote = json.loads((tmp_path / "ray" / "summary.json").read_text())
    assert remote["mean_reward"] == 1.0, proc.stdout
    assert comparable(remote) == comparable(local)
    trajs = records(tmp_path / "ray")
    assert {t["extra"]["rollout"]["backend"] for t in trajs} == {"ray"}
    assert {t["extra"]["verifier"]["backend"] for t in trajs} == {"ray"}
    # shutdown: no slot or grader actor left, no sandbox under the cluster's processes, no mount
    assert live_actors() == []
    assert bwrap_under(cluster) == []
    assert mounts_under(os.environ["TMPDIR"]) == []


def test_killed_node_every_episode_recorded_exactly_once(cluster, tmp_path):
    """A worker node removed while episodes sit in a (sleeping) step: the episodes it held are
    re-run on live nodes; every planned episode is recorded exactly once, and scored."""
    from proofgym.eval import evaluate
    from proofgym.rollout import ReferencePolicy
    from proofgym.rollout.ray_slots import RaySlots
    from proofgym.testing.sleepy import IMPORTABLE_ID

    victim = cluster.add_node(num_cpus=1, object_store_memory=100 * 2**20)
    cluster.wait_for_nodes()
    killed = threading.Event()

    def kill_soon() -> None:
        # once a slot actor is up on the victim, it is busy with 1 s steps: kill it mid-step
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not actors_on(victim.node_id, "SlotActor"):
            time.sleep(0.1)
        time.sleep(1.5)
        kill_node(cluster, victim)
        killed.set()

    killer = threading.Thread(target=kill_soon)
    killer.start()
    out = tmp_path / "run"
    try:
        _, summary = evaluate(IMPORTABLE_ID, ReferencePolicy(), episodes=12, seed=0, concurrency=4,
                              env_kwargs={"step_s": 1.0}, out=out, verifier="inline",
                              backend=RaySlots(cpus_per_slot=0.25, slots_per_node=2))
    finally:
        killer.join()
    assert killed.is_set()
    trajs = records(out)
    ids = [t["trajectory_id"] for t in trajs]
    assert len(ids) == len(set(ids)) == 12  # exactly once: nothing lost, nothing duplicated
    assert all(t["status"] == "ok" for t in trajs), [t["error"] for t in trajs]
    assert summary["mean_reward"] == 1.0 and summary["episodes"] == 12
    nodes = {t["extra"]["rollout"]["node"] for t in trajs}
    assert len(nodes) >= 3, nodes  # slots spread over the nodes (at most 2 per node)
    rerun = [t for t in trajs if t["extra"]["rollout"].get("reruns")]
    assert rerun, "the kill landed while no episode was running on the node"
    assert all(t["extra"]["rollout"]["node"] != victim.node_id[:12] for t in rerun)
    assert live_actors() == []


def test_grading_job_on_killed_node_is_regraded(cluster):
    """Grader actors spread over the nodes; the node holding some of them dies mid-grading: its
    jobs are graded again on a live node (scored verdicts, not errors)."""
    import ray

    from proofgym.testing.sleepy import slow_grading_jobs
    from proofgym.verify.pool import VerifierPool

    victim = cluster.add_node(num_cpus=1, object_store_memory=100 * 2**20)
    cluster.wait_for_nodes()
    # one grader actor per live node (head, two workers, the victim), one job on each
    pool = VerifierPool("ray", processes=4, max_in_flight=4, timeout_s=60.0)
    try:
        jobs = slow_grading_jobs(4, grade_s=5.0)
        futures = [pool.submit(job, f"job{i}") for i, job in enumerate(jobs)]
        backend = pool._backend
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not [a for a in list(backend._actors)
                                                   if a.node == victim.node_id and a.ready and a.inflight]:
            time.sleep(0.1)
        on_victim = [a for a in backend._actors if a.node == victim.node_id and a.inflight]
        assert on_victim, "no grader actor was grading on the node to kill"
        time.sleep(0.5)  # its job is now in its 5 s grading
        kill_node(cluster, victim)
        verdicts = [f.result(timeout=120) for f in futures]
    finally:
        pool.close()
    assert [v.status for v in verdicts] == ["scored"] * 4, [v.error for v in verdicts]
    assert all(v.reward == 1.0 for v in verdicts)
    assert pool.stats["worker_deaths"] >= 1
    assert ray.is_initialized()
    assert live_actors() == []


def test_ray_missing_is_a_one_line_usage_error(tmp_path):
    """Without Ray importable, `--backend ray` names the install command (exit 2, one line)."""
    import subprocess
    import sys

    blocker = tmp_path / "ray"
    blocker.mkdir()
    (blocker / "__init__.py").write_text("raise ImportError('ray is not installed here')\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}:{REPO}"}
    proc = subprocess.run([sys.executable, "-m", "proofgym", "eval", "proofgym/Arith-v0", "-n", "1",
                           "--backend", "ray", "--out", str(tmp_path / "run")],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    message = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(message) == 1 and "pip install 'proofgym[ray]'" in message[0], proc.stderr


def test_a_run_resumed_on_another_backend_continues_the_same_run(cluster, tmp_path):
    """The backend is not part of the contract: a local run cut short is finished on Ray."""
    from proofgym.eval import evaluate
    from proofgym.rollout import ReferencePolicy
    from proofgym.rollout.ray_slots import RaySlots

    out = tmp_path / "run"
    evaluate("proofgym/Arith-v0", ReferencePolicy(), episodes=4, seed=1, out=out, verifier="inline")
    lines = (out / "trajectories.jsonl").read_text().splitlines(keepends=True)
    (out / "trajectories.jsonl").write_text("".join(lines[:2]))  # as if killed after two episodes
    _, summary = evaluate("proofgym/Arith-v0", ReferencePolicy(), episodes=4, seed=1, resume=out,
                          verifier="inline", backend=RaySlots(cpus_per_slot=0.25))
    trajs = records(out)
    assert summary["resumed_from"] == 2 and summary["episodes"] == 4 and summary["mean_reward"] == 1.0
    assert len({t["trajectory_id"] for t in trajs}) == len(trajs) == 4
    assert [t["extra"]["rollout"]["backend"] for t in trajs] == ["local", "local", "ray", "ray"]


def test_more_slots_than_the_cluster_holds_is_refused(cluster):
    from proofgym.core import ConfigError
    from proofgym.eval import evaluate
    from proofgym.rollout import ReferencePolicy
    from proofgym.rollout.ray_slots import RaySlots

    with pytest.raises(ConfigError, match=r"room for \d env slots .* fewer than the 50 asked for"):
        evaluate("proofgym/Arith-v0", ReferencePolicy(), episodes=50, concurrency=50, verifier="inline",
                 backend=RaySlots(cpus_per_slot=1.0))


def test_ray_pool_timeout_and_crash_are_error_verdicts_the_rest_are_graded(cluster):
    """The pool's guarantees on the ray backend: a grader past its timeout and a grader that kills
    its process each end in an error verdict naming why; a good job beside them is scored."""
    from proofgym.testing.sleepy import slow_grading_jobs
    from proofgym.verify.pool import VerifierPool

    hang = slow_grading_jobs(1, grade_s=600.0)[0]
    # three different tasks (the same one thrice would be one job: the pool shares in-flight results)
    crash, good = slow_grading_jobs(2, grade_s=0.5, crash=True)[1], slow_grading_jobs(3, grade_s=0.5)[2]
    # the timeout leaves room for Ray to report a dead actor on a loaded machine (seconds)
    with VerifierPool("ray", processes=2, max_in_flight=4, timeout_s=8.0) as pool:
        futures = [pool.submit(job, name) for job, name in ((hang, "hang"), (crash, "crash"), (good, "good"))]
        hung, crashed, graded = (f.result(timeout=180) for f in futures)
        assert hung.status == "error" and "8 s timeout" in hung.error
        assert crashed.status == "error" and "Ray actor died" in crashed.error
        assert graded.status == "scored" and graded.reward == 1.0
        assert pool.stats["timeouts"] == 1 and pool.stats["worker_deaths"] >= 1
    assert live_actors() == []
