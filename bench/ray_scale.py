"""The Ray backend on one machine: its cost per env step, and how throughput follows the slots.

    python bench/ray_scale.py [--steps 10] [--episodes 40] [--step-s 0.1] [--slots-per-node 4]

A local Ray cluster (``ray.cluster_utils.Cluster``: a head that holds no slots, plus worker nodes
of ``num_cpus=1`` added as the run goes) on this machine; the policy is scripted and in-process
(no model latency), episodes make ``--steps`` calculator calls and then answer; no grading.

1. Per-step overhead: one slot, an env whose step costs microseconds, local vs ray. Overhead =
   mean driver-side time of one ``step`` on ray minus on local (the actor call round trip).
   Target: <= 2 ms per env step.
2. Scaling: an I/O-bound env (each step sleeps ``--step-s``), ``--slots-per-node`` slots per node
   on 1, 2 and 4 simulated nodes. Ideal = slots / step-s steps per second. Target: >= 80% of
   ideal at 4 nodes.

Every row is measured in this one run; the load average is printed with the table (other work
on the machine shifts all rows, so compare rows with each other, not with another run).
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console
from rich.table import Table

import proofgym  # noqa: F401
from proofgym.core import ToolCallAction, TurnCompleteAction
from proofgym.eval import plan_episodes
from proofgym.rollout import Orchestrator, ScriptedPolicy
from proofgym.rollout.ray_slots import RaySlots
from proofgym.rollout.slots import LocalSlots
from proofgym.testing.sleepy import make_env

console = Console(width=130)
NODE_ARGS = {"num_cpus": 1, "object_store_memory": 100 * 2**20}


def policy(steps: int) -> ScriptedPolicy:
    def script(task: Any) -> list[Any]:
        return [*(ToolCallAction("calculator", {"expression": task.expression}) for _ in range(steps)),
                TurnCompleteAction(f"\\boxed{{{task.answer}}}")]

    return ScriptedPolicy(script, name="bench-steps")


class TimedRaySlots(RaySlots):
    """RaySlots that note when each slot came up and when each step returned, so throughput is
    measured once every slot is up (actor start-up, seconds on a loaded machine, is a one-off
    per run and is reported apart)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.opened: list[float] = []
        self.steps: list[float] = []

    async def open(self) -> Any:
        slot = await super().open()
        self.opened.append(time.perf_counter())
        step = slot.step

        async def timed(action: Any) -> Any:
            result = await step(action)
            self.steps.append(time.perf_counter())
            return result

        slot.step = timed  # type: ignore[method-assign]
        return slot


def steady(slots: TimedRaySlots, *, tail_s: float) -> tuple[float, float]:
    """Steps per second from the moment the last slot came up until ``tail_s`` before the last
    step (the tail, when the queue is empty and slots go idle one by one, is left out); and the
    start-up time (first step of the run to last slot up is not counted)."""
    start, end = max(slots.opened), max(slots.steps) - tail_s
    inside = [t for t in slots.steps if start <= t <= end]
    return (len(inside) / (end - start) if end > start else float("nan")), start


def run(slots: Any, *, step_s: float, steps: int, episodes: int, concurrency: int) -> dict[str, float]:
    factory = functools.partial(make_env, step_s=step_s, n_tasks=50)
    orchestrator = Orchestrator(factory, policy(steps), concurrency=concurrency, grade=False,
                                slots=slots, runtime_threads=0 if isinstance(slots, LocalSlots) else None)
    import asyncio

    async def go() -> list[Any]:
        return await orchestrator.run(plan_episodes([f"arith-l{1 + i % 4}-s0-{i:05d}" for i in range(50)],
                                                    episodes=episodes))

    started = time.perf_counter()
    trajs = asyncio.run(go())
    wall = time.perf_counter() - started
    extra = {}
    if isinstance(slots, TimedRaySlots):
        rate, up = steady(slots, tail_s=(steps + 1) * step_s)
        extra = {"steady_steps_per_s": rate, "startup_s": up - started}
    assert all(t.status == "ok" for t in trajs), [t.error for t in trajs if t.status != "ok"][:3]
    step_times = [s.env_s for t in trajs for s in t.steps]
    return {"wall_s": wall, "steps": len(step_times), "steps_per_s": len(step_times) / wall,
            "step_ms": 1000 * statistics.mean(step_times),
            "step_p50_ms": 1000 * statistics.median(step_times), **extra}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=10, help="calculator calls per episode")
    parser.add_argument("--episodes", type=int, default=40, help="episodes per overhead row")
    parser.add_argument("--step-s", type=float, default=0.1, help="sleep per step (scaling rows)")
    parser.add_argument("--slots-per-node", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=4, help="episodes per slot (scaling rows)")
    args = parser.parse_args()

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False,
                                                            "object_store_memory": 100 * 2**20})
    cluster.add_node(**NODE_ARGS)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    rows: list[tuple[str, ...]] = []
    try:
        # 1. overhead: one slot, microsecond steps (warm-up episodes first, not counted)
        cpus = 1.0 / args.slots_per_node
        run(LocalSlots(), step_s=0.0, steps=args.steps, episodes=4, concurrency=1)
        local = run(LocalSlots(), step_s=0.0, steps=args.steps, episodes=args.episodes, concurrency=1)
        run(RaySlots(cpus_per_slot=cpus), step_s=0.0, steps=args.steps, episodes=4, concurrency=1)
        remote = run(RaySlots(cpus_per_slot=cpus), step_s=0.0, steps=args.steps, episodes=args.episodes,
                     concurrency=1)
        overhead = remote["step_ms"] - local["step_ms"]
        rows.append(("step overhead, 1 slot", "local", f"{local['step_ms']:.3f} ms/step "
                     f"(p50 {local['step_p50_ms']:.3f})", "", ""))
        rows.append(("", "ray", f"{remote['step_ms']:.3f} ms/step (p50 {remote['step_p50_ms']:.3f})",
                     f"+{overhead:.3f} ms", "<= 2 ms " + ("met" if overhead <= 2.0 else "MISSED")))
        # 2. scaling: I/O-bound steps on 1, 2, 4 nodes
        nodes = 1
        for target in (1, 2, 4):
            while nodes < target:
                cluster.add_node(**NODE_ARGS)
                nodes += 1
            cluster.wait_for_nodes()
            slots = target * args.slots_per_node
            result = run(TimedRaySlots(cpus_per_slot=cpus, slots_per_node=args.slots_per_node),
                         step_s=args.step_s, steps=args.steps, episodes=slots * args.rounds,
                         concurrency=slots)
            ideal = slots / args.step_s
            ratio = result["steady_steps_per_s"] / ideal
            verdict = ("" if target != 4 else ">= 80% " + ("met" if ratio >= 0.8 else "MISSED"))
            rows.append((f"{target} node(s), {slots} slots", "ray",
                         f"{result['steady_steps_per_s']:.1f} steps/s once up ({result['steps']} steps "
                         f"in {result['wall_s']:.1f} s, {result['startup_s']:.1f} s of it start-up)",
                         f"{ratio:.0%} of ideal {ideal:.0f}/s", verdict))
    finally:
        ray.shutdown()
        cluster.shutdown()
    load = os.getloadavg()
    table = Table(title=f"Ray backend on one machine ({os.cpu_count()} cores, load average "
                        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; step sleep {args.step_s:g} s in "
                        "the scaling rows)")
    for column in ("row", "backend", "measured", "vs baseline", "target"):
        table.add_column(column)
    for row in rows:
        table.add_row(*row)
    console.print(table)


if __name__ == "__main__":
    main()
