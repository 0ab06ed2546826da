"""Throughput of rollouts with out-of-band verification, against the scripted model server.

    python bench/throughput.py [--episodes 1000] [--latency 0.1] [--concurrency 64]

Workload: a 3-turn tool-using task (6 model calls per episode), ``--latency`` per model call, a
grader that waits half an episode's model time and burns a few ms of CPU. Compared in one run:

1. the seed's loop: one episode at a time, ``verify`` inline (the floor);
2. the orchestrator, grading inline in each slot before its next episode;
3. the orchestrator, grading out of band in the process pool.

Ideal = concurrency / (model time per episode). Then the orchestrator's own cost per env step
(zero-latency in-process scripted policy, against a bare loop doing the same work) and resident
memory growth across 10,000 episodes after warm-up. Targets are printed beside the numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import Target, Value, in_one_run, load_line, render_table
from peers import proofgym_cli, proofgym_in_process
from rich.console import Console
from rich.table import Table
from workload import CALLS_PER_EPISODE, ServerProcess, ledger_env, ledger_tasks, rss_mb

from proofgym import VerifierPool
from proofgym.eval import plan_episodes
from proofgym.record import Trajectory, trajectory_id_for
from proofgym.rollout import OpenAIPolicy, Orchestrator, ReferencePolicy

console = Console(width=130)
N_TASKS = 200
REPAIR_CONCURRENCY = 8  # a sandbox per slot: what 2 cores hold
#: The lean HTTP client; the openai SDK's own CPU per call (~3 ms here) caps a 2-core box at a
#: few hundred calls/s, which is measured separately in row 3b.
TRANSPORT = "httpx"


class BlockingChatPolicy:
    """The seed's way: a sync policy, one blocking model call at a time (same client code)."""

    def __init__(self, policy: OpenAIPolicy) -> None:
        self.policy = policy
        self.loop = asyncio.new_event_loop()

    def start(self, task: Any, obs: Any, info: Any, space: Any) -> None:
        self.session = self.loop.run_until_complete(self.policy.start_episode(task, obs, info, space))

    def act(self, obs: Any) -> Any:
        return self.loop.run_until_complete(self.session.act(obs)).action

    def describe(self) -> dict[str, Any]:
        return self.policy.describe()


def bare_episode(env: Any, policy: Any, *, task_id: str, seed: int) -> Trajectory:
    """The seed's loop, written out: reset, act, step until the end, grade inline. (proofgym's own
    ``run_episode`` is the orchestrator at concurrency 1, so it cannot serve as the floor.)"""
    t0 = time.perf_counter()
    obs, info = env.reset(seed=seed, options={"task_id": task_id})
    traj = Trajectory(trajectory_id=trajectory_id_for(None, task_id, 0), env_id="", task_id=task_id,
                      task_hash="", seed=seed, policy={}, prompt="", tools=[])
    policy.start(env.current_task, obs, info, env.action_space)
    trace = []
    policy_s = env_s = 0.0
    while True:
        a = time.perf_counter()
        action = policy.act(obs)
        b = time.perf_counter()
        obs, _, terminated, truncated, info = env.step(action)
        env_s += time.perf_counter() - b
        policy_s += b - a
        trace.append({"action": action, "obs": obs})
        if terminated or truncated:
            break
    traj.verdict = env.verify(trace)
    traj.timings = {"policy_s": policy_s, "env_s": env_s, "total_s": time.perf_counter() - t0}
    return traj


def seed_loop(base_url: str, episodes: int, grade_wait: float, grade_cpu: float) -> dict[str, float]:
    tasks = ledger_tasks(N_TASKS, grade_wait_s=grade_wait, grade_cpu_s=grade_cpu)
    env = ledger_env(tasks)
    policy = BlockingChatPolicy(OpenAIPolicy("scripted", base_url=base_url, timeout_s=30,
                                             transport=TRANSPORT))
    plan = plan_episodes(tasks.ids, episodes=episodes + 2)
    for spec in plan[:2]:  # warm-up: connection, imports
        bare_episode(env, policy, task_id=spec.task_id, seed=spec.seed)
    started = time.perf_counter()
    generating = 0.0
    rewards = []
    for spec in plan[2:]:
        traj = bare_episode(env, policy, task_id=spec.task_id, seed=spec.seed)
        generating += traj.timings["policy_s"] + traj.timings["env_s"]
        rewards.append(traj.reward)
    wall = time.perf_counter() - started
    policy.loop.run_until_complete(policy.policy.aclose())
    assert all(r == 1.0 for r in rewards), "the scripted policy must solve every episode"
    return {"episodes": episodes, "wall_s": wall, "eps": episodes / wall, "busy": generating / wall}


async def orchestrated(base_url: str, episodes: int, concurrency: int, grade_wait: float,
                       grade_cpu: float, pool: VerifierPool, inline: bool,
                       transport: str = "httpx", runtime_threads: int | None = None) -> dict[str, float]:
    tasks = ledger_tasks(N_TASKS, grade_wait_s=grade_wait, grade_cpu_s=grade_cpu)
    policy = OpenAIPolicy("scripted", base_url=base_url, timeout_s=30, transport=transport)
    try:
        warm = Orchestrator(lambda: ledger_env(tasks), policy, concurrency=concurrency, verifier=pool,
                            inline_verification=inline, runtime_threads=runtime_threads)
        await warm.run(plan_episodes(tasks.ids, episodes=concurrency, seed=10**6))
        orchestrator = Orchestrator(lambda: ledger_env(tasks), policy, concurrency=concurrency,
                                    verifier=pool, inline_verification=inline,
                                    runtime_threads=runtime_threads)
        results = await orchestrator.run(plan_episodes(tasks.ids, episodes=episodes))
    finally:
        await policy.aclose()
    rewards = [t.reward for t in results]
    assert len(results) == episodes and all(r == 1.0 for r in rewards), (
        f"{sum(r == 1.0 for r in rewards)}/{episodes} episodes scored 1.0: "
        f"{next((t.error or t.verdict for t in results if t.reward != 1.0), None)}")
    return {"episodes": episodes, "wall_s": orchestrator.wall_s, "eps": episodes / orchestrator.wall_s,
            "busy": orchestrator.slot_busy_fraction}


async def arith_math_verify(base_url: str, episodes: int, concurrency: int, inline: bool) -> dict[str, float]:
    """A CPU-bound real grader: single-turn Arith answers graded by math-verify (sympy)."""
    from proofgym.envs.arith import arith_tasks
    from proofgym.envs.arith import make_env as arith_env

    tasks = arith_tasks(N_TASKS)
    policy = OpenAIPolicy("scripted", base_url=base_url, timeout_s=30, transport=TRANSPORT)
    try:
        with VerifierPool("process", processes=2, max_in_flight=concurrency) as pool:  # fresh per row
            def make() -> Orchestrator:
                return Orchestrator(lambda: arith_env(N_TASKS, use_calculator=False, tasks=tasks), policy,
                                    concurrency=concurrency, verifier=pool, inline_verification=inline)
            await make().run(plan_episodes(tasks.ids, episodes=concurrency, seed=10**6))
            orchestrator = make()
            results = await orchestrator.run(plan_episodes(tasks.ids, episodes=episodes))
    finally:
        await policy.aclose()
    assert all(t.reward == 1.0 for t in results), "the scripted answers must all be right"
    return {"episodes": episodes, "wall_s": orchestrator.wall_s, "eps": episodes / orchestrator.wall_s,
            "busy": orchestrator.slot_busy_fraction}


async def code_repair(base_url: str, episodes: int, concurrency: int, inline: bool) -> dict[str, float]:
    """A real sandboxed grader: CodeRepair's reference fixes (the scripted server writes them
    with the file tools), graded by its hidden tests in a fresh sandbox each."""
    from proofgym import Limits, UniversalVerifiableEnv
    from proofgym.envs.code_repair import code_repair_tasks
    from proofgym.runtimes.sandbox import SandboxRuntime
    from proofgym.tasks import TaskSet

    tasks = TaskSet(code_repair_tasks())
    policy = OpenAIPolicy("scripted", base_url=base_url, timeout_s=60, transport=TRANSPORT)
    envs: list[UniversalVerifiableEnv] = []

    def env() -> UniversalVerifiableEnv:
        envs.append(UniversalVerifiableEnv(SandboxRuntime(), max_turns=1, tasks=tasks,
                                           limits=Limits(max_turns=1, max_tool_calls=40)))
        return envs[-1]
    try:
        with VerifierPool("process", processes=2, max_in_flight=concurrency) as pool:  # fresh per row
            def make() -> Orchestrator:
                return Orchestrator(env, policy, concurrency=concurrency, verifier=pool,
                                    inline_verification=inline)
            await make().run(plan_episodes(tasks.ids, episodes=concurrency, seed=10**6))
            orchestrator = make()
            results = await orchestrator.run(plan_episodes(tasks.ids, episodes=episodes))
    finally:
        await policy.aclose()
        for e in envs:
            e.close()
    assert all(t.reward == 1.0 for t in results), [
        (t.task_id, t.error or t.verdict) for t in results if t.reward != 1.0][:3]
    return {"episodes": episodes, "wall_s": orchestrator.wall_s, "eps": episodes / orchestrator.wall_s,
            "busy": orchestrator.slot_busy_fraction}


def overhead_per_step(episodes: int, repeats: int) -> dict[str, float]:
    """What the orchestrator adds per env step over a bare sync loop playing the same episodes
    (zero-latency scripted policy, concurrency 1, grading on threads off the slot's path, as
    the orchestrator normally runs; the bare loop grades inline): in wall time, with runtime
    calls on the thread pool (default) and on the loop (``runtime_threads=0``), and in CPU time
    (all threads), which waiting for a busy machine's scheduler does not inflate."""
    tasks = ledger_tasks(N_TASKS)
    plan = plan_episodes(tasks.ids, episodes=episodes)
    steps = episodes * CALLS_PER_EPISODE
    bare_env = ledger_env(tasks)
    policy = ReferencePolicy()

    def bare() -> tuple[float, float]:
        w0, c0 = time.perf_counter(), time.process_time()
        for spec in plan:
            bare_episode(bare_env, policy, task_id=spec.task_id, seed=spec.seed)
        return time.perf_counter() - w0, time.process_time() - c0

    def orch(concurrency: int, threads: int | None, cheap: bool = True) -> tuple[float, float]:
        async def run() -> tuple[float, float]:
            with VerifierPool("inline") as pool:
                o = Orchestrator(lambda: ledger_env(tasks, cheap=cheap), ReferencePolicy(),
                                 concurrency=concurrency,
                                 verifier=pool, runtime_threads=threads, inline_verification=False)
                w0, c0 = time.perf_counter(), time.process_time()
                await o.run(plan, collect=False)
                return time.perf_counter() - w0, time.process_time() - c0
        return asyncio.run(run())

    bare()
    orch(1, None)
    bares: list[float] = []
    over: dict[str, list[float]] = {"threads": [], "loop": [], "cpu": [], "c64": [],
                                    "default": [], "default_cpu": []}
    for _ in range(repeats):
        b_wall, b_cpu = bare()
        bares.append(b_wall / steps)
        d_wall, d_cpu = orch(1, None)  # the default settings; the lookup tool is declared cheap
        over["default"].append((d_wall - b_wall) / steps)
        over["default_cpu"].append((d_cpu - b_cpu) / steps)
        o_wall, o_cpu = orch(1, None, cheap=False)  # not declared cheap: runtime threads
        over["threads"].append((o_wall - b_wall) / steps)
        over["cpu"].append((o_cpu - b_cpu) / steps)
        over["loop"].append((orch(1, 0, cheap=False)[0] - b_wall) / steps)
        over["c64"].append(orch(64, None)[0] / steps)
    return {"bare_us": statistics.median(bares) * 1e6,
            **{f"{k}_us": statistics.median(v) * 1e6 for k, v in over.items()}}


async def memory_growth(episodes: int) -> dict[str, float]:
    tasks = ledger_tasks(N_TASKS)
    with VerifierPool("process", processes=2, max_in_flight=64) as pool:
        async def run(n: int, seed: int) -> None:
            o = Orchestrator(lambda: ledger_env(tasks), ReferencePolicy(), concurrency=64, verifier=pool)
            await o.run(plan_episodes(tasks.ids, episodes=n, seed=seed), collect=False)

        await run(1000, 10**7)  # warm-up
        gc.collect()
        before = rss_mb()
        await run(episodes, 0)
        gc.collect()
        after = rss_mb()
    return {"before_mb": before, "after_mb": after, "growth_mb": after - before}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--seed-episodes", type=int, default=16, help="episodes of the (slow) seed loop")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.1, help="model latency per call (s)")
    parser.add_argument("--grader-cpu", type=float, default=0.003, help="CPU seconds per grade")
    parser.add_argument("--memory-episodes", type=int, default=10_000)
    parser.add_argument("--sweep-episodes", type=int, default=300,
                        help="episodes per row of the grader-wait sweep and the math-verify rows (0: skip)")
    parser.add_argument("--cli-episodes", type=int, default=1000,
                        help="episodes of the `proofgym eval` vs in-process row (0: skip)")
    parser.add_argument("--code-repair-episodes", type=int, default=48,
                        help="episodes per CodeRepair row (sandboxed pytest grader, c=8; 0: skip)")
    parser.add_argument("--quick", action="store_true",
                        help="fewer episodes everywhere (a few minutes): ratios, not the targets' sizes")
    parser.add_argument("--in-process-only", action="store_true",
                        help="only the overhead and memory measurements, as JSON (used internally)")
    args = parser.parse_args()
    if args.quick:
        args.episodes, args.seed_episodes, args.memory_episodes = 300, 6, 2000
        args.sweep_episodes, args.cli_episodes, args.code_repair_episodes = 120, 300, 16
    if args.in_process_only:
        result = {**overhead_per_step(episodes=300, repeats=3 if args.quick else 7),
                  **asyncio.run(memory_growth(args.memory_episodes))}
        print(json.dumps(result))
        return
    model_time = CALLS_PER_EPISODE * args.latency
    grade_wait = model_time / 2
    ideal = args.concurrency / model_time
    bench_started = time.perf_counter()
    load_at_start = os.getloadavg()[0]
    console.print(f"workload: {CALLS_PER_EPISODE} model calls/episode x {args.latency * 1000:.0f} ms, "
                  f"grader waits {grade_wait * 1000:.0f} ms + {args.grader_cpu * 1000:.0f} ms CPU; "
                  f"concurrency {args.concurrency}; ideal {ideal:.1f} episodes/s")

    # The in-process measurements run in a fresh process of their own, so neither they nor the
    # HTTP runs inherit the other's threads, caches and garbage.
    proc = subprocess.run([sys.executable, __file__, "--in-process-only",
                           "--memory-episodes", str(args.memory_episodes),
                           *(["--quick"] if args.quick else [])],
                          capture_output=True, text=True, check=True)
    over = mem = json.loads(proc.stdout.strip().splitlines()[-1])
    sweep: list[tuple[float, dict[str, float], dict[str, float]]] = []
    with ServerProcess("ledger", N_TASKS, args.latency) as base_url:
        floor = seed_loop(base_url, args.seed_episodes, grade_wait, args.grader_cpu)
        # A fresh pool for every measured row: no row can profit from another's work.
        with VerifierPool("inline", max_in_flight=args.concurrency) as pool:
            inline = asyncio.run(orchestrated(base_url, args.episodes, args.concurrency, grade_wait,
                                              args.grader_cpu, pool, inline=True))
        with VerifierPool("process", processes=2, max_in_flight=args.concurrency) as pool:
            oob = asyncio.run(orchestrated(base_url, args.episodes, args.concurrency, grade_wait,
                                           args.grader_cpu, pool, inline=False))
        with VerifierPool("process", processes=2, max_in_flight=args.concurrency) as pool:
            on_loop = asyncio.run(orchestrated(base_url, args.episodes, args.concurrency, grade_wait,
                                               args.grader_cpu, pool, inline=False, runtime_threads=0))
        for ratio in ((0.25, 1.0, 2.0) if args.sweep_episodes else ()):
            rows = []
            for inline_mode in (True, False):
                with VerifierPool("process", processes=2, max_in_flight=args.concurrency) as pool:
                    rows.append(asyncio.run(orchestrated(
                        base_url, args.sweep_episodes, args.concurrency, ratio * model_time,
                        args.grader_cpu, pool, inline=inline_mode)))
            sweep.append((ratio, rows[0], rows[1]))
    math_rows: list[tuple[str, dict[str, float]]] = []
    if args.sweep_episodes:
        with ServerProcess("arith", N_TASKS, args.latency) as arith_url:
            for inline_mode in (True, False):
                math_rows.append(("inline" if inline_mode else "out of band", asyncio.run(
                    arith_math_verify(arith_url, args.sweep_episodes, args.concurrency, inline_mode))))
    repair_rows: list[dict[str, float]] = []
    if args.code_repair_episodes:
        with ServerProcess("code_repair", 0, args.latency) as repair_url:
            for inline_mode in (True, False):
                repair_rows.append(asyncio.run(code_repair(repair_url, args.code_repair_episodes,
                                                           REPAIR_CONCURRENCY, inline_mode)))

    cli_row: tuple[dict[str, float], dict[str, float]] | None = None
    if args.cli_episodes:
        # The whole `proofgym eval` command (a fresh interpreter) against `evaluate()` in an
        # interpreter that has imported proofgym; both with a fresh grader pool and run directory.
        with ServerProcess("arith", 400, args.latency) as arith_url:
            cli_row = (proofgym_cli(arith_url, args.cli_episodes, args.concurrency),
                       proofgym_in_process(arith_url, args.cli_episodes, args.concurrency))

    table = Table(title="rollout throughput (scripted OpenAI-compatible server over HTTP)")
    for col in ("mode", "episodes", "wall s", "episodes/s", "slots busy", "efficiency vs ideal",
                "vs floor"):
        table.add_column(col, justify="right" if col != "mode" else "left")
    floor_ideal = 1 / model_time
    for name, r, ideal_of in (("1 seed loop (sequential, verify inline)", floor, floor_ideal),
                              ("2 orchestrator, inline verification", inline, ideal),
                              ("3 orchestrator, process pool (out of band)", oob, ideal),
                              ("3b same, runtime_threads=0 (env steps on the loop)", on_loop, ideal)):
        table.add_row(name, str(r["episodes"]), f"{r['wall_s']:.2f}", f"{r['eps']:.2f}",
                      f"{r['busy']:.1%}", f"{r['eps'] / ideal_of:.1%}", f"{r['eps'] / floor['eps']:.1f}x")
    console.print(table)
    console.print(load_line(load_at_start))
    if sweep or math_rows or repair_rows:
        extra = Table(title=f"graders: out of band vs inline ({args.sweep_episodes} episodes per row, "
                            f"concurrency {args.concurrency}, a fresh pool per row)")
        for col in ("grader", "inline eps/s", "out of band eps/s", "gain", "out-of-band efficiency"):
            extra.add_column(col, justify="left" if col == "grader" else "right")
        for ratio, inl, oo in sweep:
            extra.add_row(f"ledger, waits {ratio:g}x model time + {args.grader_cpu * 1000:.0f} ms CPU",
                          f"{inl['eps']:.1f}", f"{oo['eps']:.1f}", f"{oo['eps'] / inl['eps']:.2f}x",
                          f"{oo['eps'] / ideal:.1%}")
        if math_rows:
            (_, inl), (_, oo) = math_rows
            arith_ideal = args.concurrency / args.latency
            extra.add_row("Arith, math-verify (CPU-bound, 1 model call)", f"{inl['eps']:.1f}",
                          f"{oo['eps']:.1f}", f"{oo['eps'] / inl['eps']:.2f}x",
                          f"{oo['eps'] / arith_ideal:.1%}")
        if repair_rows:
            inl, oo = repair_rows
            extra.add_row(f"CodeRepair, sandboxed pytest ({args.code_repair_episodes} episodes, "
                          f"c={REPAIR_CONCURRENCY}, sandboxes)", f"{inl['eps']:.2f}", f"{oo['eps']:.2f}",
                          f"{oo['eps'] / inl['eps']:.2f}x", f"busy {oo['busy']:.0%}")
        console.print(extra)
        console.print(load_line(load_at_start))

    efficiency, speedup = oob["eps"] / ideal, oob["eps"] / inline["eps"]
    us = Target("<=", 100, "us")
    entries = [
        ("out-of-band efficiency vs ideal", Value(efficiency * 100, "%"), Target(">=", 90, "%")),
        ("out-of-band vs inline verification", Value(speedup, "x"), Target(">=", 1.4, "x")),
        ("overhead per env step, wall, default (tool declared cheap: on the loop)",
         Value(over["default_us"], "us"), us),
        ("overhead per env step, CPU time, default", Value(over["default_cpu_us"], "us"), us),
        ("overhead per env step, wall, tool not declared cheap (runtime threads)",
         Value(over["threads_us"], "us"), us),
        ("overhead per env step, CPU time, runtime threads", Value(over["cpu_us"], "us"), us),
        ("overhead per env step, wall, runtime_threads=0", Value(over["loop_us"], "us"), us),
        (f"RSS growth over {args.memory_episodes:,} episodes after warm-up",
         Value(mem["growth_mb"], "MB", f"{mem['before_mb']:.0f} -> {mem['after_mb']:.0f} MB"),
         Target("<=", 20, "MB")),
    ]
    if cli_row is not None:
        cli, inproc = cli_row
        gap = cli["wall_s"] / inproc["wall_s"] - 1
        entries.append((f"`proofgym eval` vs evaluate() in process ({args.cli_episodes} Arith episodes, "
                        f"c={args.concurrency})", Value(gap * 100, "+%", f"{cli['wall_s']:.2f} s vs "
                                                                         f"{inproc['wall_s']:.2f} s"),
                        Target("<=", 10, "+%")))
    print(render_table(in_one_run(entries, load_at_start, os.getloadavg()[0]),
                       title="targets (one run, one process: the load is the whole run's)"))
    console.print(f"(overheads: medians of {3 if args.quick else 7} runs of 300 episodes) bare loop "
                  f"{over['bare_us']:.1f} us/step; "
                  "orchestrator at concurrency 64: "
                  f"{over['c64_us']:.1f} us/step of wall time (zero-latency policy)")
    console.print(f"bench wall time {time.perf_counter() - bench_started:.0f} s; load average "
                  f"{os.getloadavg()[0]:.1f} (at start {load_at_start:.1f}) on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
