"""Run-store write throughput: fsync per record, shared fsyncs across writer threads (group
commit), against a flush-only baseline (no fsync: survives a killed process, not a power cut),
all measured in this run on this disk.

    python bench/store.py [--records 400] [--threads 8]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import load1, load_line

from proofgym.eval import make_env, plan_episodes, run_plan
from proofgym.record import RolloutContract, RunStore
from proofgym.rollout import ReferencePolicy


def flush_only(trajs: list, root: Path) -> float:
    path = root / "baseline.jsonl"
    t0 = time.perf_counter()
    with path.open("ab") as f:
        for traj in trajs:
            f.write(traj.to_json() + b"\n")
            f.flush()
    return time.perf_counter() - t0


def store_writes(trajs: list, root: Path, contract: RolloutContract, threads: int) -> float:
    store = RunStore.create(root, contract)
    chunks = [trajs[i::threads] for i in range(threads)]
    workers = [threading.Thread(target=lambda c=c: [store.write(t) for t in c]) for c in chunks]
    t0 = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - t0
    store.close()
    assert len(store.completed) == len(trajs)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=400)
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args()
    load_start = load1()
    env = make_env("proofgym/Arith-v0")
    contract = RolloutContract.build(env, policy={"name": "reference"}, env_id="proofgym/Arith-v0")
    n_tasks = min(args.records, len(env.tasks))
    plan = plan_episodes(env.tasks.ids[:n_tasks], repeats=-(-args.records // n_tasks))[: args.records]
    trajs = run_plan(env, ReferencePolicy(), plan, contract_id=contract.id)
    size = sum(len(t.to_json()) for t in trajs) / len(trajs)
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        root = Path(tmp)
        base = flush_only(trajs, root)
        rows = [("flush only, no fsync (baseline)", base)]
        rows.append(("run store, 1 writer thread", store_writes(trajs, root / "one", contract, 1)))
        rows.append((f"run store, {args.threads} writer threads",
                     store_writes(trajs, root / "many", contract, args.threads)))
    print(f"{args.records} records of {size / 1024:.1f} KiB each\n")
    print(f"{'writer':<38} {'records/s':>10} {'ms/record':>10} {'vs baseline':>12}")
    for name, elapsed in rows:
        rate = args.records / elapsed
        print(f"{name:<38} {rate:>10.0f} {elapsed / args.records * 1e3:>10.3f} "
              f"{base / elapsed:>11.2f}x")
    print(load_line(load_start))


if __name__ == "__main__":
    main()
