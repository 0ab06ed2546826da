"""CodeRepair grading cost: the reference fix of every bundled task, graded once each, one at a time.

    python bench/code_repair_grading.py              # the 16 tasks, about a minute
    python bench/code_repair_grading.py --tasks 4

Each grading is ``run_tests_isolated`` with the task's own settings (its hidden tests and their
mutants, protected paths, time limits), as CodeRepair's grader runs it. The table gives the
median wall time and CPU time per grading (CPU of the whole process tree, sandboxes included,
from a ``cpuacct`` cgroup as root, else ``getrusage``) and the load average before and after:
a row measured at load above 1.5 is marked, and cannot be held against a target. To compare two
checkouts, run this file from each (it grades the checkout it lives in) back to back.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from sandboxed_grading import CpuClock  # noqa: E402

from proofgym.envs.code_repair.task import CodeRepairTask  # noqa: E402
from proofgym.verify import sandboxed  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=None, help="grade only the first N tasks")
    args = parser.parse_args()
    data = ROOT / "proofgym/envs/code_repair/data"
    tasks = [CodeRepairTask.load(d) for d in sorted(data.iterdir()) if (d / "task.json").is_file()]
    tasks = tasks[:args.tasks] if args.tasks else tasks
    clock = CpuClock()
    load0 = os.getloadavg()[0]
    walls, cpus, tests, phases = [], [], 0, []
    for task in tasks:
        c0, w0 = clock(), time.perf_counter()
        run = sandboxed.run_tests_isolated(task.repo, task.solution_files, tests=task.test_ids,
                                           hidden=task.hidden_files, protected=task.protected,
                                           timeout_s=task.grading_timeout_s,
                                           test_timeout_s=task.test_timeout_s)
        walls.append(time.perf_counter() - w0)
        time.sleep(0.3)  # the sandbox's cleanup runs in the background: count its CPU too
        cpus.append(clock() - c0 - 0.0)
        ok = run.failure is None and all(s == "passed" for s in run.results.values())
        if not ok:
            raise SystemExit(f"{task.id}: the reference fix did not pass: {run}")
        tests += len(run.results) + run.mutants
        phases.append(run.timings)
    load1 = os.getloadavg()[0]
    table = Table(title=f"CodeRepair reference gradings ({len(tasks)} tasks, {tests} test "
                        f"processes; CPU from {clock.source})")
    for col in ("grading wall s (median)", "grading CPU s (median)", "wall s (max)", "load 1-min",
                "measured quietly"):
        table.add_column(col)
    quiet = max(load0, load1) <= 1.5
    table.add_row(f"{statistics.median(walls):.2f}", f"{statistics.median(cpus):.2f}",
                  f"{max(walls):.2f}", f"{load0:.2f} -> {load1:.2f}",
                  "yes" if quiet else "NO (load > 1.5: not comparable to a target)")
    Console().print(table)
    # where a grading's CPU goes: the job's share of the sandbox's CPU group (a spare's boot is
    # not in it), and the runner's phases inside it (its own CPU, its test processes', wall)
    detail = Table(title="per grading, median (runner_* phases measured inside the sandbox)")
    for col in ("phase", "seconds"):
        detail.add_column(col)
    for key in sorted({k for t in phases for k in t if k.startswith(("runner_", "sandbox_"))}):
        detail.add_row(key, f"{statistics.median(t.get(key, 0.0) for t in phases):.3f}")
    Console().print(detail)


if __name__ == "__main__":
    main()
