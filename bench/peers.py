"""proofgym against the `verifiers` library on the same work: single-turn Arith tasks answered by
the same scripted OpenAI-compatible server, at the same concurrency.

    python bench/peers.py [--episodes 1000] [--concurrency 64] [--latency 0.1]
                          [--verifiers-python PATH]

verifiers 0.2.1 (its ``SingleTurnEnv`` API; 0.4 replaced it) pins its own openai client range, so
it runs in its own interpreter: ``--verifiers-python`` (or ``PEERS_PYTHON``) points at a Python
with it installed (``python -m venv .venv-peers && .venv-peers/bin/pip install 'verifiers==0.2.1'``).
Both sides grade with math-verify on the boxed answer; both get a warm-up batch first.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rich.console import Console
from rich.table import Table
from workload import ServerProcess

from proofgym.envs.arith import arith_tasks
from proofgym.envs.arith import make_env as arith_env
from proofgym.eval import plan_episodes
from proofgym.rollout import OpenAIPolicy, Orchestrator
from proofgym.verify.pool import VerifierPool

console = Console(width=130)
HERE = Path(__file__).resolve().parent


async def proofgym_side(base_url: str, n: int, concurrency: int, transport: str) -> dict[str, float]:
    ids = arith_tasks(n).ids
    policy = OpenAIPolicy("scripted", base_url=base_url, timeout_s=60, transport=transport)
    try:
        with VerifierPool("process", processes=2, max_in_flight=concurrency) as pool:
            def orchestrator() -> Orchestrator:
                return Orchestrator(lambda: arith_env(n_tasks=n, use_calculator=False), policy,
                                    concurrency=concurrency, verifier=pool)

            await orchestrator().run(plan_episodes(ids, episodes=min(concurrency, n), seed=10**6))
            started = time.perf_counter()
            results = await orchestrator().run(plan_episodes(ids, episodes=n))
            wall = time.perf_counter() - started
    finally:
        await policy.aclose()
    rewards = [t.reward for t in results]
    return {"episodes": len(results), "wall_s": wall,
            "mean_reward": sum(r or 0.0 for r in rewards) / len(rewards),
            "errors": sum(t.status == "error" or t.reward is None for t in results)}


def verifiers_side(python: str, base_url: str, n: int, concurrency: int) -> dict[str, float]:
    tasks = [{"prompt": t.get_spec().prompt, "answer": t.answer} for t in arith_tasks(n)]
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(tasks, f)
    try:
        proc = subprocess.run([python, str(HERE / "verifiers_side.py"), f.name, base_url, str(concurrency)],
                              capture_output=True, text=True, timeout=600)
    finally:
        os.unlink(f.name)
    if proc.returncode != 0:
        raise SystemExit(f"the verifiers side failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.1, help="model latency per call (s)")
    parser.add_argument("--verifiers-python", default=os.environ.get("PEERS_PYTHON", sys.executable))
    args = parser.parse_args()
    check = subprocess.run([args.verifiers_python, "-c", "import verifiers.envs.singleturn_env"],
                           capture_output=True, text=True)
    if check.returncode != 0:
        raise SystemExit(f"{args.verifiers_python} cannot import verifiers' SingleTurnEnv; install "
                         "verifiers==0.2.1 in its own virtualenv and pass --verifiers-python (see --help)")
    started = time.perf_counter()
    n, c = args.episodes, args.concurrency
    console.print(f"{n} single-turn Arith episodes, concurrency {c}, model latency "
                  f"{args.latency * 1000:.0f} ms; ideal {c / args.latency:.0f} episodes/s; "
                  f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    with ServerProcess("arith", n, args.latency) as base_url:
        peer = verifiers_side(args.verifiers_python, base_url, n, c)
        ours = asyncio.run(proofgym_side(base_url, n, c, "openai"))
        lean = asyncio.run(proofgym_side(base_url, n, c, "aiohttp"))
    table = Table(title="same tasks, same scripted server, same concurrency")
    for col in ("framework", "episodes", "wall s", "episodes/s", "mean reward", "vs verifiers"):
        table.add_column(col, justify="left" if col == "framework" else "right")
    peer_eps = peer["episodes"] / peer["wall_s"]
    for name, r in ((f"verifiers {peer['version']} SingleTurnEnv", peer),
                    ("proofgym (openai SDK transport)", ours),
                    ("proofgym (aiohttp transport)", lean)):
        eps = r["episodes"] / r["wall_s"]
        table.add_row(name, str(r["episodes"]), f"{r['wall_s']:.2f}", f"{eps:.1f}", f"{r['mean_reward']:.3f}",
                      f"{eps / peer_eps:.2f}x")
    console.print(table)
    ratio = (ours["episodes"] / ours["wall_s"]) / peer_eps
    verdict = "met" if ratio >= 1.0 else "NOT met"
    console.print(f"target proofgym >= 1.0x verifiers (same openai SDK client): {ratio:.2f}x -> {verdict}; "
                  f"bench wall time {time.perf_counter() - started:.0f} s; "
                  f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
