"""SearchQA-v0: the search tool's round trip and env reset, against a linear scan of the corpus,
all measured in this run.

Rows: ``search`` through ``env.step`` (the tool round trip an agent pays: argument validation, the
runtime's worker thread, FTS5 query, page formatting), the FTS5 query alone, the linear scan
(tokenizing every document and keeping those with every query word: the same result set, no
index, no ranking), and ``env.reset``. Queries are the reference solutions' own (package names and
the broad description queries of levels 2, 3 and 5), over the full 8,900-document corpus.

    python bench/search_qa.py [--queries 200] [--resets 2000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import load1, load_line

from proofgym.core import ToolCallAction
from proofgym.envs.search_qa import corpus, make_env


def median_ms(fn, items) -> float:
    times = []
    for item in items:
        t0 = time.perf_counter()
        fn(item)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--resets", type=int, default=2000)
    args = parser.parse_args()
    load_start = load1()
    t0 = time.perf_counter()
    docs = corpus()
    env = make_env(faults="none")
    print(f"corpus: {len(docs)} documents; index and {len(env.tasks)} tasks built in "
          f"{time.perf_counter() - t0:.2f} s")
    tasks = list(env.tasks)
    step = max(1, len(tasks) // args.queries)
    queries = [t.plan.query for t in tasks[::step]][: args.queries]
    env.reset(seed=0, options={"task": tasks[0]})

    calls = 0

    def via_env(q: str) -> None:
        nonlocal calls
        calls += 1
        if calls % 40 == 0:  # episodes as long as the reference's (the budget is 80 calls)
            env.reset(seed=calls, options={"task": tasks[0]})
        obs, *_ = env.step(ToolCallAction("search", {"query": q}))
        assert obs["type"] == "tool_output", obs

    for q in queries[:20]:  # warm-up
        via_env(q)
    rows = [("search tool round trip (env.step)", median_ms(via_env, queries)),
            ("FTS5 query + page (Corpus.search)", median_ms(lambda q: docs.search(q, 1), queries)),
            ("linear scan of the corpus (baseline)",
             median_ms(docs.linear_search, queries[: max(10, args.queries // 10)]))]
    ids = [t.id for t in tasks]
    rows.append(("env.reset", median_ms(lambda i: env.reset(seed=i[0], options={"task_id": i[1]}),
                                        [(n, ids[n % len(ids)]) for n in range(args.resets)])))
    base = rows[2][1]
    print(f"{'operation':<40} {'median ms':>10} {'scan / this':>12}")
    for name, ms in rows:
        print(f"{name:<40} {ms:>10.3f} {base / ms:>11.0f}x")
    print("targets: search round trip <= 5 ms, reset <= 1 ms")
    print(load_line(load_start))


if __name__ == "__main__":
    main()
