"""Batched grading in the TRL reward function: one batch of CodeRepair-v0 completions graded by
``EnvironmentReward`` (every job submitted to the VerifierPool at once) against one completion at
a time (each graded in this process, then the next: what a per-completion reward function does).

    python bench/trl_reward.py [--batch 16] [--rounds 2] [--processes 2]

Each round replays the same episodes (reset, the task's reference edit, a final message) in
``--batch`` adapter instances (one sandbox each); only grading is timed. Needs bubblewrap.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import load1, load_line

from proofgym.core import ToolCallAction
from proofgym.integrations.trl import EnvironmentReward, dataset, environment_factory


def play(envs: list, rows: list[dict]) -> list[list[dict]]:
    """Replay each env's episode up to its final message; returns TRL-style completions."""
    completions = []
    for env, row in zip(envs, rows, strict=True):
        env.reset(**row)
        task = env.env.current_task
        edit = next(a for a in task.reference_solution()
                    if isinstance(a, ToolCallAction) and a.tool_name in ("str_replace", "write_file"))
        getattr(env, edit.tool_name)(**edit.tool_input)
        completions.append([{"role": "assistant", "content": "Fixed the bug."}])
    return completions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args()
    load_start = load1()
    cls = environment_factory("proofgym/CodeRepair-v0")
    envs = [cls() for _ in range(args.batch)]
    train = dataset(envs[0].env)
    rows = [train[i % len(train)] for i in range(args.batch)]
    reward = EnvironmentReward(processes=args.processes)
    try:
        reward(completions=play(envs, rows), environments=envs)  # warm-up: pool workers, caches
        batched, single = [], []
        for _ in range(args.rounds):
            completions = play(envs, rows)
            t0 = time.perf_counter()
            rewards = reward(completions=completions, environments=envs)
            batched.append(time.perf_counter() - t0)
            assert rewards == [1.0] * args.batch, rewards
            completions = play(envs, rows)
            t0 = time.perf_counter()
            one_by_one = [env._finish("Fixed the bug.").run().reward for env in envs]
            single.append(time.perf_counter() - t0)
            assert one_by_one == [1.0] * args.batch, one_by_one
    finally:
        reward.close()
        for env in envs:
            env._close()
    b, s = statistics.median(batched), statistics.median(single)
    print(f"CodeRepair-v0, batch of {args.batch} completions, {os.cpu_count()} cores, "
          f"median of {args.rounds} rounds")
    print(f"{'grading':<58} {'wall s':>8} {'speed-up':>9}")
    print(f"{'one completion at a time, in process':<58} {s:>8.2f} {1.0:>8.2f}x")
    print(f"{f'EnvironmentReward: one batch, VerifierPool ({args.processes} processes)':<58} "
          f"{b:>8.2f} {s / b:>8.2f}x")
    print(load_line(load_start))


if __name__ == "__main__":
    main()
