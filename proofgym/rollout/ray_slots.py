"""The ``ray`` slot backend: each env slot is a Ray actor, on some node of a cluster.

The actor owns its env and the env's runtime, so sandboxes run on the worker nodes (which need
bubblewrap and proofgym installed). The driver keeps the event loop and the policy's model
calls; ``reset``/``step`` are awaited actor calls, so the loop never blocks on a node.

Placement: each slot actor reserves ``cpus_per_slot`` CPUs and is pinned to the live node that
holds the fewest of this run's slots and has room (its CPUs, at most ``slots_per_node``); a node
that lost a slot gets new ones only when no other node has room. A run asking for more slots than the
live nodes can hold is refused up front (actors that can never be placed would wait forever).

Faults: a call on an actor that died (its node was removed or crashed, the process was killed)
raises :class:`~proofgym.rollout.slots.SlotLostError` and marks the slot lost; the orchestrator
re-runs the episode in a fresh actor on a live node, ``episode_retries`` times, then records it
as a ``status="error"`` trajectory (an infrastructure error, which ``--resume`` re-runs).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import math
import os
import socket
from typing import Any

from proofgym.core import AgentAction, ConfigError, ProofgymError, Task, TaskSpec
from proofgym.core.defaults import DEFAULTS
from proofgym.env import VerificationJob
from proofgym.rollout.slots import EnvFactory, SlotLostError
from proofgym.runtimes.ray_cluster import cluster_shape, connect, first_line


class SlotActor:
    """Runs in a Ray worker process: one env, driven by the driver's episode loop."""

    def __init__(self, env_factory: EnvFactory) -> None:
        self.env = env_factory()

    def where(self) -> dict[str, Any]:
        import ray

        return {"node": ray.get_runtime_context().get_node_id(), "host": socket.gethostname(),
                "pid": os.getpid()}

    def reset(self, seed: int | None, options: dict[str, Any]) -> tuple[Any, ...]:
        obs, info = self.env.reset(seed=seed, options=options)
        return obs, info, self.env.current_task, self.env.current_spec, self.env.action_space

    def step(self, action: AgentAction) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        return self.env.step(action)

    def charge(self, tokens: int) -> None:
        self.env.charge(tokens=tokens)

    def verification_job(self, trace: list[Any]) -> VerificationJob:
        return self.env.verification_job(trace)

    def close(self) -> None:
        self.env.close()


class RaySlot:
    """The driver's handle on one slot actor."""

    def __init__(self, owner: RaySlots, actor: Any, node: str, where: dict[str, Any]) -> None:
        self._owner = owner
        self.actor = actor
        self.node = node
        self.where = where
        self.lost = False
        self.current_task: Task | None = None
        self.current_spec: TaskSpec | None = None
        self.action_space: Any = None

    async def _call(self, method: str, *args: Any) -> Any:
        ray = self._owner.ray
        try:
            return await getattr(self.actor, method).remote(*args)
        except ray.exceptions.RayTaskError as exc:  # the env's own error: the episode's failure
            cause = getattr(exc, "cause", None)
            raise (cause if isinstance(cause, Exception) else exc) from None
        except ray.exceptions.RayError as exc:  # the actor, its process or its node is gone
            self.lost = True
            raise SlotLostError(f"the env slot's Ray actor on node {self.node[:12]} was lost during "
                                f"{method}: {first_line(exc)}") from None

    async def reset(self, seed: int | None, options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        obs, info, self.current_task, self.current_spec, self.action_space = await self._call(
            "reset", seed, options)
        return obs, info

    async def step(self, action: AgentAction) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        return await self._call("step", action)

    def charge(self, tokens: int) -> None:
        # Not awaited: calls from one caller to an actor run in order, so it lands before the
        # next step (a lost actor shows up at that step).
        self.actor.charge.remote(tokens)

    async def verification_job(self, trace: list[Any]) -> VerificationJob:
        return await self._call("verification_job", trace)

    def close(self) -> None:
        self._owner.release(self)


class RaySlots:
    """Env slots in Ray actors (see the module docstring).

    Args:
        address: The cluster (default: ``$RAY_ADDRESS``, a local ``ray start`` cluster, or a new
            local one). A process already connected (``ray.init``) keeps its connection.
        cpus_per_slot: CPUs each slot actor reserves (fractions allowed; ``0`` reserves none).
        slots_per_node: At most this many slots per node (default: as many as the CPUs allow).
        episode_retries: Re-runs of an episode whose slot was lost, before an error record.
        start_timeout_s: How long a new slot actor may take to start (placement and the env's
            construction) before it counts as lost.
    """

    name = "ray"

    def __init__(self, *, address: str | None = None, cpus_per_slot: float = DEFAULTS.cpus_per_slot,
                 slots_per_node: int | None = None, episode_retries: int = 2,
                 start_timeout_s: float = 120.0) -> None:
        if not cpus_per_slot >= 0 or (slots_per_node is not None and slots_per_node < 1):
            raise ConfigError(f"cpus_per_slot must be >= 0 and slots_per_node >= 1 "
                              f"(got {cpus_per_slot}, {slots_per_node})")
        if episode_retries < 0 or not start_timeout_s > 0:
            raise ConfigError("episode_retries must be >= 0 and start_timeout_s > 0")
        self.address = address
        self.cpus_per_slot = cpus_per_slot
        self.slots_per_node = slots_per_node
        self.episode_retries = episode_retries
        self.start_timeout_s = start_timeout_s
        self.ray: Any = None
        self._actor_class: Any = None
        self._factory_ref: Any = None
        self._live: dict[int, RaySlot] = {}
        self._placing: collections.Counter[str] = collections.Counter()
        self._suspect: set[str] = set()  # nodes that lost a slot: new slots go elsewhere
        self._closing: list[Any] = []
        self._shape: dict[str, Any] = {}

    def room(self) -> int:
        """Slots the cluster has room for now (connecting to it first)."""
        self.ray = connect(self.address)
        self._shape = cluster_shape()
        return sum(self._rooms().values())

    def start(self, env_factory: EnvFactory, *, concurrency: int, runtime_threads: int) -> None:
        self.ray = ray = connect(self.address)
        self._shape = cluster_shape()
        room = sum(self._rooms().values())
        if concurrency > room:
            raise ConfigError(
                f"the Ray cluster has room for {room} env slots ({self._shape['nodes']} live nodes, "
                f"{self._shape['cpus']:g} CPUs, {self.cpus_per_slot:g} CPUs per slot"
                + (f", {self.slots_per_node} per node" if self.slots_per_node else "")
                + f"), fewer than the {concurrency} asked for; lower --concurrency or --cpus-per-slot, "
                "or add nodes")
        self._actor_class = ray.remote(SlotActor)
        self._factory_ref = ray.put(env_factory)  # shipped once, not once per slot

    def _rooms(self) -> dict[str, int]:
        """Slots each live node can hold (its CPUs over ``cpus_per_slot``, at most ``slots_per_node``)."""
        rooms = {}
        for node in self.ray.nodes():
            if not node.get("Alive"):
                continue
            cpus = float(node.get("Resources", {}).get("CPU", 0.0))
            fits = math.inf if self.cpus_per_slot == 0 else math.floor(cpus / self.cpus_per_slot + 1e-9)
            rooms[node["NodeID"]] = int(min(fits, self.slots_per_node or math.inf, 1 << 20))
        return rooms

    def _placement(self) -> tuple[str, dict[str, Any]]:
        """The live node with the fewest of this run's slots that has room for one more; a node
        that lost a slot only when no other has room (it may be dying while Ray still lists it
        as alive)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        used = collections.Counter(slot.node for slot in self._live.values() if not slot.lost)
        used.update(self._placing)  # slots still starting count where they were placed
        rooms = self._rooms()
        free = [node for node, room in rooms.items() if node not in self._suspect and used[node] < room]
        if not free:  # every node with room lost a slot (a flaky env, not dead nodes): use them
            free = [node for node, room in rooms.items() if used[node] < room]
        if not free:
            raise SlotLostError("no live node has room for another env slot")
        node = min(free, key=lambda n: used[n])
        return node, {"scheduling_strategy": NodeAffinitySchedulingStrategy(node, soft=False)}

    async def open(self) -> RaySlot:
        ray = self.ray
        node, placement = self._placement()
        actor = self._actor_class.options(num_cpus=self.cpus_per_slot, max_restarts=0, max_task_retries=0,
                                          **placement).remote(self._factory_ref)
        self._placing[node] += 1
        try:
            where = await asyncio.wait_for(actor.where.remote(), self.start_timeout_s)
        except (TimeoutError, asyncio.TimeoutError):
            ray.kill(actor, no_restart=True)
            raise SlotLostError(f"a new env slot actor did not start within {self.start_timeout_s:g} s "
                                "(no node had room, or its env took that long to build)") from None
        except ray.exceptions.RayActorError as exc:
            if getattr(exc, "actor_init_failed", False):  # the env factory itself raised: a real error
                raise ProofgymError(f"building the env in a Ray actor failed: {_init_error(exc)}") from None
            self._suspect.add(node)
            raise SlotLostError(f"a new env slot actor died while starting: {first_line(exc)}") from None
        except ray.exceptions.RayError as exc:  # e.g. unschedulable: its node died meanwhile
            self._suspect.add(node)
            raise SlotLostError(f"a new env slot actor could not start: {first_line(exc)}") from None
        finally:
            self._placing[node] -= 1
        slot = RaySlot(self, actor, where["node"], {"backend": "ray", "node": where["node"][:12],
                                                    "host": where["host"], **self._cluster()})
        self._live[id(slot)] = slot
        return slot

    def _cluster(self) -> dict[str, Any]:
        return {"cluster": {"nodes": self._shape.get("nodes"), "cpus": self._shape.get("cpus"),
                            "cpus_per_slot": self.cpus_per_slot, "slots_per_node": self.slots_per_node}}

    def release(self, slot: RaySlot) -> None:
        """A slot is done: close its env (a sandbox's processes and mounts go with it), then the
        actor is killed at :meth:`shutdown`; a lost slot is only killed."""
        self._live.pop(id(slot), None)
        if slot.lost:
            self._suspect.add(slot.node)
            with contextlib.suppress(Exception):  # it is gone already; this only frees the handle
                self.ray.kill(slot.actor, no_restart=True)
            return
        self._closing.append((slot.actor, slot.actor.close.remote()))

    def shutdown(self) -> None:
        if self.ray is None:
            return
        ray = self.ray
        for slot in list(self._live.values()):
            self.release(slot)
        refs = [ref for _, ref in self._closing]
        if refs:
            ray.wait(refs, num_returns=len(refs), timeout=30.0)
        for actor, _ in self._closing:
            with contextlib.suppress(Exception):
                ray.kill(actor, no_restart=True)
        self._closing.clear()

    def describe(self) -> dict[str, Any]:
        return {"backend": "ray", **self._cluster()}


def _init_error(exc: BaseException) -> str:
    text = str(exc)
    marker = "raised in its creation task, "
    return first_line(text.split(marker, 1)[1]) if marker in text else first_line(exc)
