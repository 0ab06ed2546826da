"""The ``ray`` backend of the :class:`~proofgym.verify.pool.VerifierPool`: grader actors on a Ray
cluster, the process backend's semantics carried over.

A few grader actors (``processes`` of them, placed on the least-used live nodes) each run many jobs at once on
threads (``max_concurrency``), as a process worker does. A job travels to its actor through the
object store (``ray.put`` once, the reference is sent). The scheduler in
:mod:`proofgym.verify.pool` is unchanged: its queue, in-flight limit (backpressure), deadlines
and de-duplication hold as for every backend.

* Timeout: the job is answered with an error verdict; its actor takes no new work and is killed
  (``ray.kill``) once its other jobs finish, and a fresh actor takes its place.
* An actor that dies (its node was removed, the grader killed the process): a job that was
  alone on it is the culprit and gets an error verdict; jobs that shared it are re-run, each
  alone on a fresh actor (on a live node), as the process backend does. So a grading job on a
  killed node is re-graded elsewhere, and one job is re-run at most once.
"""

from __future__ import annotations

import collections
import contextlib
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from proofgym.core import Verdict
from proofgym.env import VerificationJob
from proofgym.runtimes.ray_cluster import cluster_shape, connect, first_line
from proofgym.verify.pool.backend import PoolJob, Scheduler
from proofgym.verify.pool.worker import run_job

#: How long a new grader actor may take to start before its jobs' clocks run anyway.
STARTUP_ALLOWANCE_S = 60.0
#: How often the watcher thread looks for new results (it also wakes on each result).
POLL_S = 0.02


class GraderActor:
    """Runs in a Ray worker process: grades jobs on its threads (a threaded actor)."""

    def __init__(self, modules: Sequence[str]) -> None:
        import importlib

        from proofgym.verify.pool.warmup import warm_up
        from proofgym.verify.sandboxed import keep_no_spares

        # an actor is ended with ray.kill (no atexit), so it keeps no pre-booted grading runner
        # that would outlive it with its mounts: every grading here boots its own sandbox
        keep_no_spares()
        for module in modules:  # the graders' code, imported before job clocks start
            with contextlib.suppress(Exception):  # an import error shows up, clearly, in the job
                importlib.import_module(module)
        # its task modules come with its jobs: warm the math check up whatever they are
        warm_up()

    def ready(self) -> str:
        import ray

        return ray.get_runtime_context().get_node_id()

    def grade(self, job: VerificationJob) -> Verdict:
        return run_job(job)


@dataclass(eq=False)
class _Actor:
    handle: Any
    capacity: int
    ready_ref: Any
    solo: bool = False
    draining: bool = False
    ready: bool = False
    node: str = ""
    retired: bool = False
    inflight: dict[int, PoolJob] = field(default_factory=dict)


class RayBackend:
    name = "ray"

    def __init__(self, scheduler: Scheduler, *, processes: int, max_in_flight: int,
                 address: str | None = None, cpus_per_grader: float = 0.0,
                 preload: Sequence[str] = ()) -> None:
        self._scheduler = scheduler
        self.ray = ray = connect(address)
        self.processes = processes
        self.cpus_per_grader = cpus_per_grader
        self._per_actor = math.ceil(max_in_flight / processes)
        self._modules = ["proofgym", *preload]
        self._actors: list[_Actor] = []
        # result ref -> (job, actor) and ready ref -> actor: what the watcher waits on
        self._refs: dict[Any, tuple[PoolJob, _Actor]] = {}
        self._starting: dict[Any, _Actor] = {}
        self._class = ray.remote(GraderActor)
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        self._affinity = NodeAffinitySchedulingStrategy
        self._suspect: set[str] = set()
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None
        self.shape = cluster_shape()  # recorded on every verdict's provenance: asked once

    def encode(self, job: VerificationJob) -> Any:
        return self.ray.put(job)  # pickled once; raises here if it cannot travel

    # ------------------------------------------------------------- scheduling (lock held)
    def start(self, job: PoolJob) -> Callable[[], None] | bool:
        actor = self._new_actor(1, solo=True) if job.solo else self._free_actor()
        if actor is None:
            return False
        job.place = actor
        job.deadline = time.monotonic() + job.timeout_s + (0.0 if actor.ready else STARTUP_ALLOWANCE_S)
        actor.inflight[job.id] = job
        self._refs[actor.handle.grade.remote(job.payload)] = (job, actor)
        if self._watcher is None:
            self._watcher = threading.Thread(target=self._watch, name="proofgym-ray-grader", daemon=True)
            self._watcher.start()
        return True

    def finished(self, job: PoolJob) -> None:
        actor: _Actor | None = job.place
        if actor is None:
            return
        actor.inflight.pop(job.id, None)
        if not actor.inflight and (actor.solo or actor.draining):
            self._retire(actor)

    def expired(self, job: PoolJob) -> str:
        actor: _Actor | None = job.place
        if actor is None:
            return ""
        actor.inflight.pop(job.id, None)
        actor.draining = True  # its thread is stuck: replace the actor, kill it when idle
        if not actor.inflight:
            self._retire(actor)
        return " (its Ray grader actor is being replaced)"

    def _free_actor(self) -> _Actor | None:
        regular = [a for a in self._actors if not a.solo and not a.draining and not a.retired]
        while len(regular) < self.processes:
            regular.append(self._new_actor(self._per_actor))
        best = min(regular, key=lambda a: len(a.inflight))
        return best if len(best.inflight) < best.capacity else None

    def _new_actor(self, capacity: int, *, solo: bool = False) -> _Actor:
        node = self._node_for_actor()
        placement = self._affinity(node, soft=False)
        handle = self._class.options(num_cpus=self.cpus_per_grader, max_concurrency=capacity,
                                     max_restarts=0, max_task_retries=0,
                                     scheduling_strategy=placement).remote(self._modules)
        actor = _Actor(handle, capacity, handle.ready.remote(), solo=solo, node=node)
        self._starting[actor.ready_ref] = actor
        self._actors.append(actor)
        self._scheduler.stats["workers_started"] += 1
        return actor

    def _node_for_actor(self) -> str:
        """Lock held: the live node with the fewest of this pool's actors, never one where an
        actor just died (Ray may still list a dying node as alive)."""
        used = collections.Counter(a.node for a in self._actors if not a.retired)
        nodes = [n["NodeID"] for n in self.ray.nodes() if n.get("Alive") and n["NodeID"] not in self._suspect]
        if not nodes:  # every node is suspect: let Ray choose among the live ones
            nodes = [n["NodeID"] for n in self.ray.nodes() if n.get("Alive")]
        return min(nodes, key=lambda n: used[n])

    def _retire(self, actor: _Actor) -> None:
        if actor.retired:
            return
        actor.retired = True
        if actor in self._actors:
            self._actors.remove(actor)
        self._starting.pop(actor.ready_ref, None)
        for ref in [r for r, (_, a) in self._refs.items() if a is actor]:
            del self._refs[ref]  # abandoned (timed out) jobs: their answers no longer count
        with contextlib.suppress(Exception):  # already dead: nothing to stop
            self.ray.kill(actor.handle, no_restart=True)
        self._scheduler.wake()

    # ------------------------------------------------------------- the watcher thread
    def _watch(self) -> None:
        ray = self.ray
        while not self._stop.is_set():
            with self._scheduler.lock:
                refs = list(self._refs) + list(self._starting)
            if not refs:
                self._stop.wait(POLL_S)
                continue
            done, _ = ray.wait(refs, num_returns=1, timeout=POLL_S, fetch_local=True)
            for ref in done:
                self._settle(ref)

    def _settle(self, ref: Any) -> None:
        ray, scheduler = self.ray, self._scheduler
        try:
            value, failure = ray.get(ref), None
        except ray.exceptions.RayTaskError as exc:  # run_job never raises: a Ray-side failure
            value, failure = Verdict.failed(f"the Ray grading task failed: {first_line(exc)}"), None
        except (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError,
                ray.exceptions.NodeDiedError, ray.exceptions.ObjectLostError) as exc:
            value, failure = None, exc
        with scheduler.lock:
            starting = self._starting.pop(ref, None)
            if starting is not None:
                if failure is None:
                    starting.ready = True
                    now = time.monotonic()
                    for job in starting.inflight.values():
                        job.deadline = now + job.timeout_s
                else:
                    self._died(starting, failure)
                scheduler.wake()
                return
            entry = self._refs.pop(ref, None)
            if entry is None:
                return
            job, actor = entry
            if failure is not None:
                self._died(actor, failure)
                scheduler.wake()
                return
        scheduler.finish(job.id, value)

    def _died(self, actor: _Actor, failure: BaseException) -> None:
        """Lock held: ``actor`` is gone; its jobs are re-run alone, or failed if alone already."""
        scheduler = self._scheduler
        self._suspect.add(actor.node)
        orphans = list(actor.inflight.values())
        actor.inflight.clear()
        was_retired = actor.retired
        self._retire(actor)
        if scheduler.closed or was_retired or not orphans:
            return
        scheduler.stats["worker_deaths"] += 1
        if actor.solo:
            scheduler.fail_later(orphans[0], f"the grader's Ray actor died while grading this job alone "
                                             f"({first_line(failure)}); the pool replaced it")
        else:
            for job in orphans:
                scheduler.requeue_solo(job)

    def close(self) -> None:
        self._stop.set()
        with self._scheduler.lock:
            actors = list(self._actors)
            self._actors.clear()
            self._refs.clear()
            self._starting.clear()
        for actor in actors:
            actor.retired = True
            with contextlib.suppress(Exception):
                self.ray.kill(actor.handle, no_restart=True)
        if self._watcher is not None:
            self._watcher.join(timeout=2.0)

    def describe(self) -> dict[str, Any]:
        return {"cpus_per_grader": self.cpus_per_grader, "cluster": self.shape}
