"""The `verifiers` half of bench/peers.py, run with a Python that has verifiers 0.2.1 installed.

    python bench/verifiers_side.py TASKS.json BASE_URL CONCURRENCY

Reads the tasks (prompt, answer), runs them through ``vf.SingleTurnEnv`` with ``vf.MathRubric``
against the same scripted server, and prints one JSON line: episodes, wall time, mean reward.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time


def main() -> None:
    tasks_path, base_url, concurrency = sys.argv[1], sys.argv[2], int(sys.argv[3])
    import verifiers as vf
    from datasets import Dataset
    from verifiers.types import ClientConfig

    with open(tasks_path) as f:
        tasks = json.load(f)
    dataset = Dataset.from_list([{"question": t["prompt"], "answer": t["answer"]} for t in tasks])
    env = vf.SingleTurnEnv(eval_dataset=dataset, rubric=vf.MathRubric())
    os.environ.setdefault("PEERS_API_KEY", "EMPTY")
    client = ClientConfig(api_base_url=base_url, api_key_var="PEERS_API_KEY", max_retries=0)

    async def run() -> tuple[float, list[float]]:
        # Warm-up (connections, the rubric's process pool), as the proofgym side gets.
        await env.evaluate(client, "scripted", num_examples=min(concurrency, len(tasks)),
                           max_concurrent=concurrency, on_progress=lambda *a, **k: None)
        started = time.perf_counter()
        outputs = await env.evaluate(client, "scripted", num_examples=len(tasks),
                                     max_concurrent=concurrency, on_progress=lambda *a, **k: None)
        wall = time.perf_counter() - started
        rewards = [float(o["reward"]) for o in outputs["outputs"]]
        return wall, rewards

    wall, rewards = asyncio.run(run())
    print(json.dumps({"episodes": len(rewards), "wall_s": wall,
                      "mean_reward": sum(rewards) / max(1, len(rewards)), "version": vf.__version__}))


if __name__ == "__main__":
    main()
