"""``proofgym validate -c N``: wall time at concurrency 1 and 2 (or as given) on the same tasks.

Issue 13's target: on CodeRepair-v0, ``-c 2`` at least 1.7x faster than ``-c 1``. Each row is one
``proofgym validate`` subprocess (this checkout) on the first ``--tasks`` tasks; rows run one after
another in the same run, with the load average printed next to each (other work on the machine
slows the concurrent row most: compare only rows of one run).

    python bench/validate_concurrency.py --env proofgym/CodeRepair-v0 --tasks 4 --concurrency 1 2
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import load1, load_line

REPO = Path(__file__).resolve().parents[1]
TARGET = 1.7


def run(env_id: str, tasks: int, concurrency: int) -> tuple[float, float | None, bool, list[str]]:
    """Wall time measured here, the wall time the command reports, whether it passed, and its
    FAIL lines."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "proofgym", "validate", env_id, "-n", str(tasks),
                           "-c", str(concurrency)], env=env, capture_output=True, text=True)
    wall = time.monotonic() - started
    found = re.search(r"in ([\d.]+) s wall time", proc.stdout)
    fails = [line for line in proc.stdout.splitlines() if line.startswith("FAIL")]
    if proc.returncode != 0 and not fails:
        fails = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
    return wall, float(found.group(1)) if found else None, proc.returncode == 0, fails


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="proofgym/CodeRepair-v0")
    parser.add_argument("--tasks", type=int, default=4)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    load_start = load1()
    print(f"{args.env}: proofgym validate -n {args.tasks}, {os.cpu_count()} CPUs")
    print(f"{'-c':>3} {'wall s':>8} {'reported s':>11} {'speedup':>8} {'passed':>7} "
          f"{'load avg (1/5/15 min) before':>30}")
    base = None
    for c in args.concurrency:
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        wall, reported, ok, fails = run(args.env, args.tasks, c)
        base = base or wall
        print(f"{c:>3} {wall:>8.1f} {reported if reported is not None else float('nan'):>11.1f} "
              f"{base / wall:>7.2f}x {ok!s:>7} {load:>30}", flush=True)
        for line in fails[:5]:
            print(f"      {line[:200]}", flush=True)
    print(f"target: -c 2 at least {TARGET}x faster than -c 1 (speedup column, same run)")
    print(load_line(load_start))


if __name__ == "__main__":
    main()
