"""A real local Ray cluster for the tests (``ray.cluster_utils.Cluster``), and what they check."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import IN_CI, REPO

#: Small object stores (/dev/shm may be small), no dashboard, no usage reporting.
NODE_ARGS = {"num_cpus": 1, "object_store_memory": 100 * 2**20}


def require_ray() -> None:
    """Ray missing: a failure in CI (the [ray] extra must be installed), a skip locally."""
    try:
        import ray  # noqa: F401
    except ImportError:
        message = "ray is not installed (pip install 'proofgym[ray]')"
        if IN_CI:
            pytest.fail(f"{message}; CI must install the [ray] extra in .ci/run")
        pytest.skip(message)


def make_cluster(workers: int = 2) -> Any:
    """A head and ``workers`` worker nodes on this machine; this process is connected to it."""
    import ray
    from ray.cluster_utils import Cluster

    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    # The cluster's processes (and CLI runs started from the tests) make their scratch dirs and
    # sandbox mounts under a directory of their own, so a leak is told apart from the sandboxes
    # other work on this machine has mounted meanwhile. Short: Ray's socket paths live there too.
    os.environ["TMPDIR"] = tempfile.mkdtemp(prefix="pgray-", dir="/tmp")
    # the nodes' worker processes import this checkout, not an installed proofgym
    os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    for attempt in (1, 2):
        # Ray gives a starting node 30 s to register; a machine under heavy load can miss that
        # once, so the cluster is started once more before the tests fail on it.
        cluster = Cluster(initialize_head=False)
        try:
            cluster.add_node(**NODE_ARGS, include_dashboard=False)
            for _ in range(workers):  # started side by side; waited for together
                cluster.add_node(wait=False, **NODE_ARGS)
            cluster.wait_for_nodes()
            break
        except Exception:
            cluster.shutdown()
            if attempt == 2:
                raise
    ray.init(address=cluster.address, namespace="proofgym", log_to_driver=False)
    return cluster


def comparable(summary: dict[str, Any]) -> dict[str, Any]:
    """A summary without its timings (the only part two backends may differ in)."""
    kept = {k: v for k, v in summary.items() if k != "time"}
    # graders' own timing metrics (CodeRepair's grading_overhead_s, ...): seconds, not results
    kept["metrics"] = {k: v for k, v in summary.get("metrics", {}).items() if not k.endswith("_s")}
    return kept


def records(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "trajectories.jsonl").read_text().splitlines() if line]


def live_actors() -> list[str]:
    """Actors on the cluster that are not dead (slot and grader actors alike, of any driver)."""
    from ray._private import state

    return [info.get("ActorClassName", aid) for aid, info in state.actors().items()
            if info.get("State") != "DEAD"]


def actors_on(node_id: str, class_name: str) -> list[str]:
    """Live actors of ``class_name`` on the node ``node_id``."""
    from ray._private import state

    return [aid for aid, info in state.actors().items() if info.get("State") == "ALIVE"
            and info.get("ActorClassName") == class_name
            and info.get("Address", {}).get("NodeID") == node_id]


def kill_node(cluster: Any, node: Any) -> None:
    """Kill a worker node the way a machine dies: its raylet and every process under it (its
    workers, hence its actors and their sandboxes) at once. ``remove_node`` alone stops the raylet
    but leaves its worker processes serving calls until they notice."""
    import psutil

    doomed = []
    for infos in node.all_processes.values():
        for info in infos:
            if info.process is not None:
                with_children = [psutil.Process(info.process.pid)]
                try:
                    with_children += with_children[0].children(recursive=True)
                except psutil.NoSuchProcess:
                    continue
                doomed += with_children
    for proc in doomed:
        with contextlib.suppress(psutil.NoSuchProcess):  # exited on its own meanwhile
            proc.kill()
    cluster.remove_node(node, allow_graceful=False)


def bwrap_under(cluster: Any) -> list[int]:
    """bwrap processes descending from the cluster's processes (other work on this machine may
    run sandboxes of its own: only the cluster's count)."""
    import psutil

    roots = []
    for node in [cluster.head_node, *cluster.worker_nodes]:
        for infos in node.all_processes.values():
            roots += [info.process.pid for info in infos if info.process is not None]
    found = []
    for pid in roots:
        try:
            children = psutil.Process(pid).children(recursive=True)
        except psutil.NoSuchProcess:
            continue
        found += [c.pid for c in children if c.name() == "bwrap"]
    return found


def mounts_under(path: str) -> list[str]:
    """Mount points (of any process: one mount namespace) below ``path``."""
    return [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()
            if line.split()[1].startswith(path.rstrip("/") + "/")]
