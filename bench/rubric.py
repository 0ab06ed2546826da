"""Rubric overhead per verdict: three components (a normalised-match grader and two metrics),
scored with per-component timeouts on pooled daemon threads (the default) and inline
(``timeout_s=None``), against calling the same three functions directly, all in this run.

    python bench/rubric.py [--n 3000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import load1, load_line

from proofgym import TurnCompleteAction
from proofgym.core import Trace, TraceStep
from proofgym.verify import Component, Rubric, make_grader


def per_call(fn, n: int) -> float:
    for _ in range(min(n, 100)):  # warm-up
        fn()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=3000)
    args = parser.parse_args()
    load_start = load1()
    trace = Trace([TraceStep(TurnCompleteAction("Answer: Paris"), {"type": "episode_end"})])
    grader = make_grader("normalized", "Paris")

    def length(t, rt):
        return min(1.0, len(t.final_message() or "") / 100)

    def answered(t, rt):
        return bool(t.final_message())

    parts = [Component("correct", grader), Component("length", length, weight=0),
             Component("answered", answered, weight=0)]
    pooled, inline = Rubric(parts), Rubric(parts, timeout_s=None)
    rows = [("the three functions called directly (baseline)",
             per_call(lambda: (grader(trace), length(trace, None), answered(trace, None)), args.n)),
            ("Rubric, inline (timeout_s=None)", per_call(lambda: inline.score(trace), args.n)),
            ("Rubric, pooled daemon threads (default)", per_call(lambda: pooled.score(trace), args.n))]
    base = rows[0][1]
    print(f"{'scoring':<48} {'us/verdict':>11} {'vs baseline':>12}")
    for name, seconds in rows:
        print(f"{name:<48} {seconds * 1e6:>11.1f} {seconds / base:>11.1f}x")
    print(load_line(load_start))


if __name__ == "__main__":
    main()
