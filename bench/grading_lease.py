"""What the grading lease costs: wall time of a GRPO-shaped run and of an eval, with and without it.

The lease (``proofgym.runtimes.grading_lease``) makes a grading of a task wait until no episode
of that task is live on the host, and a new episode of a task wait while a grading of it runs or
waits. Two workloads on CodeRepair-v0 with its reference solutions, each played by a policy that
"thinks" ``--think-s`` seconds before every action (a model's latency; 0 for the bare runtime):

* **grpo**: ``--tasks`` tasks, ``--group`` (G) episodes of each, at concurrency G: every
  episode of a group is live at once, so the group's gradings wait for its last episode.
* **eval**: ``--eval-tasks`` tasks, one episode each, at ``--concurrency``: no two live episodes
  share a task, so nothing should wait.

Each row is one run in a fresh subprocess (this checkout, ``evaluate`` with a ``process``
verifier pool); the ``without`` rows set the bench-only, UNSAFE switch
``PROOFGYM_UNSAFE_BENCH_NO_GRADING_LEASE=1`` (never for real runs: hidden tests can leak to live
episodes). Rows alternate with/without ``--rounds`` times; the load average is printed per row
(compare only rows of one run, on a quiet host).

    python bench/grading_lease.py --tasks 4 --group 8 --eval-tasks 16 --think-s 0.5 --rounds 2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
UNSAFE = "PROOFGYM_UNSAFE_BENCH_NO_GRADING_LEASE"


class ThinkingReference:
    """The reference policy, waiting ``think_s`` before each action (an async policy: the wait
    blocks nothing but its own episode)."""

    def __init__(self, think_s: float) -> None:
        from proofgym.rollout.policies import ReferencePolicy

        self.think_s, self._reference = think_s, ReferencePolicy

    async def start_episode(self, task: Any, observation: Mapping[str, Any],
                            info: Mapping[str, Any], action_space: Any) -> Any:
        policy = self._reference()
        policy.start(task, observation, info, action_space)
        return _Session(policy, self.think_s)

    def describe(self) -> dict[str, Any]:
        return {"name": "reference-thinking", "version": f"think={self.think_s}"}


class _Session:
    def __init__(self, policy: Any, think_s: float) -> None:
        self.policy, self.think_s = policy, think_s

    async def act(self, observation: Mapping[str, Any]) -> Any:
        from proofgym.rollout.async_policy import PolicyStep

        await asyncio.sleep(self.think_s)
        return PolicyStep(self.policy.act(observation))

    async def aclose(self) -> None:
        return None


def child(args: argparse.Namespace) -> None:
    """One run, in this process; prints one JSON line."""
    from proofgym.eval import evaluate

    started = time.monotonic()
    trajs, _summary = evaluate("proofgym/CodeRepair-v0", ThinkingReference(args.think_s),
                              episodes=args.n, repeats=args.repeats, concurrency=args.concurrency,
                              verifier="process")
    wall = time.monotonic() - started
    rewards = [t.verdict.reward for t in trajs if t.verdict is not None]
    errors = sum(1 for t in trajs if t.status == "error" or
                 (t.verdict is not None and t.verdict.status == "error"))
    print(json.dumps({"wall_s": wall, "episodes": len(trajs), "mean_reward": sum(rewards) /
                      max(1, len(rewards)), "errors": errors}))


def run(kind: str, lease: bool, args: argparse.Namespace) -> dict[str, Any]:
    if kind == "grpo":
        n, repeats, concurrency = args.tasks, args.group, args.group
    else:
        n, repeats, concurrency = args.eval_tasks, 1, args.concurrency
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop(UNSAFE, None)
    if not lease:
        env[UNSAFE] = "1"
    proc = subprocess.run([sys.executable, __file__, "--child", "--n", str(n), "--repeats",
                           str(repeats), "--concurrency", str(concurrency), "--think-s",
                           str(args.think_s)], env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{kind} run failed:\n{proc.stderr[-3000:]}")
    return {**json.loads(proc.stdout.strip().splitlines()[-1]), "n": n, "G": repeats,
            "c": concurrency}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=4, help="GRPO: tasks")
    parser.add_argument("--group", type=int, default=8, help="GRPO: episodes per task (G)")
    parser.add_argument("--eval-tasks", type=int, default=16, help="eval: tasks, one episode each")
    parser.add_argument("--concurrency", type=int, default=8, help="eval: concurrency")
    parser.add_argument("--think-s", type=float, default=0.5, help="policy wait before each action")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--only", choices=("grpo", "eval"))
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--repeats", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    print(f"grading lease cost on CodeRepair-v0 (reference, think {args.think_s:g} s per action), "
          f"{os.cpu_count()} CPUs")
    print(f"| {'run':<5} | {'lease':<7} | {'tasks':>5} | {'G':>2} | {'-c':>3} | {'episodes':>8} | "
          f"{'wall s':>7} | {'vs without':>10} | {'reward':>6} | {'errors':>6} | "
          f"{'load avg (1/5/15) before':>24} |")
    print("|" + "|".join("-" * w for w in (7, 9, 7, 4, 5, 10, 9, 12, 8, 8, 26)) + "|")
    for kind in ("grpo", "eval"):
        if args.only and kind != args.only:
            continue
        for _ in range(args.rounds):
            without = None
            for lease in (False, True):
                load = " ".join(f"{x:.2f}" for x in os.getloadavg())
                row = run(kind, lease, args)
                without = row["wall_s"] if not lease else without
                ratio = f"{row['wall_s'] / without:.2f}x" if lease and without else "-"
                print(f"| {kind:<5} | {'with' if lease else 'without':<7} | {row['n']:>5} | "
                      f"{row['G']:>2} | {row['c']:>3} | {row['episodes']:>8} | "
                      f"{row['wall_s']:>7.1f} | {ratio:>10} | {row['mean_reward']:>6.2f} | "
                      f"{row['errors']:>6} | {load:>24} |", flush=True)


if __name__ == "__main__":
    main()
