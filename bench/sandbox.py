"""Benchmark of the sandbox runtime against the obvious baselines, measured in the same run.

    python bench/sandbox.py [--quick]   # about a minute on 2 cores (--quick: fewer repeats)

Rows (medians):
  * episode reset, 1,000 and 10,000 file snapshots: ``reset()`` until a shell is ready, vs
    ``shutil.copytree`` of the same tree (the copy-per-episode design). Cold (no spare,
    ``prestart=False``) is the headline, like-for-like with the copy; warm (the prestarted spare is
    ready because the previous episode lasted longer than a boot) is reported without a ratio,
    since the copy gets no such head start.
  * tool round trip ``bash: true`` through the persistent shell vs a fresh ``bwrap`` (with the
    same overlay, mounts and limits) per command.
  * isolated verification: ``run_tests_isolated`` on a bundled task with its reference fix, vs
    the same pytest command run in an already running sandbox holding the same files: the
    difference is the overhead of isolation (fresh sandbox, files, report pipe, cleanup).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from proofgym.envs.code_repair import code_repair_tasks
from proofgym.runtimes.sandbox import SandboxHome, SandboxLimits, SandboxRuntime
from proofgym.verify.sandboxed import run_tests_isolated


def median_ms(fn: Callable[[], object], n: int, setup: Callable[[], object] | None = None) -> float:
    times = []
    for _ in range(n):
        if setup is not None:
            setup()
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


def make_tree(root: Path, n_files: int) -> Path:
    for i in range(n_files):
        d = root / f"pkg{i // 100:03d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"mod{i % 100:02d}.py").write_text(f"VALUE_{i} = {i}\n" * 20)
    return root


def bench_reset(tree: Path, scratch: Path, n: int) -> tuple[float, float, float]:
    def episode(rt: SandboxRuntime) -> None:
        rt.execute("bash", {"command": "echo changed > pkg000/mod00.py && echo new > new.txt"})
        time.sleep(0.15)  # the agent thinking: the spare sandbox boots meanwhile

    results = []
    for prestart in (True, False):
        with SandboxRuntime(tree, prestart=prestart, scratch_dir=scratch) as rt:
            def reset(rt: SandboxRuntime = rt) -> None:
                rt.reset()
                rt.start()
            results.append(median_ms(reset, n, setup=lambda rt=rt: episode(rt)))
    copies = scratch / "copies"
    counter = iter(range(10**6))
    results.append(median_ms(lambda: shutil.copytree(tree, copies / str(next(counter))), max(5, n // 3)))
    shutil.rmtree(copies, ignore_errors=True)
    return results[0], results[1], results[2]


def bench_round_trip(tree: Path, scratch: Path, n: int) -> tuple[float, float]:
    with SandboxRuntime(tree, scratch_dir=scratch) as rt:
        rt.execute("bash", {"command": "true"})
        persistent = median_ms(lambda: rt.execute("bash", {"command": "true"}), n)
    home = SandboxHome(SandboxLimits(), parent=scratch)
    try:
        overlay = home.overlay(tree, "fresh")

        def fresh() -> None:
            spawned = home.boot(overlay, ["bash", "-c", "true"], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL)
            spawned.proc.wait()
        fresh_ms = median_ms(fresh, max(10, n // 10))
    finally:
        home.close()
    return persistent, fresh_ms


def bench_verification(n: int) -> tuple[float, float, float, str]:
    """Isolated grading vs the same pytest command in an already running sandbox that holds the
    same files, run alternately; the median of the paired differences is what isolation costs
    (fresh sandbox, files, report pipe, parsing, cleanup). Also returns the host-side part alone
    (everything but the sandboxed process), which is free of pytest's own run-to-run noise."""
    task = next(t for t in code_repair_tasks() if t.id == "csv-quoted-fields")
    tests = task.test_files
    diffs, host_side = [], []
    with SandboxRuntime(task.repo) as rt:
        for files in (task.solution_files, task.hidden_files):
            for path, data in files.items():
                rt.execute("write_file", {"path": path, "content": data.decode()})
        command = ("python -m pytest -q -p no:cacheprovider --tb=short --continue-on-collection-errors "
                   "-o junit_family=xunit1 --junitxml=/tmp/report.xml " + " ".join(tests))
        result = rt.execute("bash", {"command": command})
        assert result.ok and "passed" in result.output, result.output
        for _ in range(n):
            t = time.perf_counter()
            run = run_tests_isolated(task.repo, task.solution_files, tests=tests,
                                     hidden=task.hidden_files, protected=task.protected)
            isolated = time.perf_counter() - t
            assert run.results and run.report_error is None, run
            t = time.perf_counter()
            rt.execute("bash", {"command": command})
            diffs.append(isolated - (time.perf_counter() - t))
            host_side.append(run.timings["prepare_s"] + run.timings["cleanup_s"])
    return (statistics.median(diffs) * 1000, statistics.median(host_side) * 1000,
            isolated * 1000, task.id)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repeats per row")
    args = parser.parse_args()
    reps = (12, 100, 8) if args.quick else (30, 300, 25)
    started = time.perf_counter()
    load_at_start = os.getloadavg()[0]
    console = Console(width=140)
    scratch = Path(tempfile.mkdtemp(prefix="proofgym-bench-"))
    rows = []
    try:
        for n_files in (1_000, 10_000):
            tree = make_tree(scratch / f"tree{n_files}", n_files)
            warm, cold, copy = bench_reset(tree, scratch, reps[0])
            # cold is the headline: the copytree baseline gets no background head start, so a
            # warm row (spare booted while the previous episode ran) would not be like-for-like
            rows.append((f"episode reset, {n_files:,} files (cold, prestart=False)", cold,
                         f"copytree {copy:.1f} ms", copy / cold, "<= 20 ms", cold <= 20))
            rows.append((f"episode reset, {n_files:,} files (warm spare; baseline has no head "
                         "start)", warm, f"copytree {copy:.1f} ms", None, "(reported, no target)",
                         None))
        persistent, fresh = bench_round_trip(scratch / "tree1000", scratch, reps[1])
        rows.append(("tool round trip `bash: true`", persistent, f"fresh bwrap {fresh:.1f} ms",
                     fresh / persistent, "<= 2 ms, >= 5x", persistent <= 2 and fresh / persistent >= 5))
        overhead, host_side, isolated, task_id = bench_verification(reps[2])
        rows.append((f"isolated verification overhead ({task_id})", overhead,
                     "same pytest in a running sandbox (paired); "
                     f"host-side part {host_side:.1f} ms; last total {isolated:.0f} ms", None,
                     "<= 50 ms", overhead <= 50))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    table = Table(title="proofgym sandbox benchmark (medians; baselines measured in this run)")
    for col in ("measurement", "ours (ms)", "baseline", "speedup", "target", "met"):
        table.add_column(col)
    for name, ours, base, speedup, target, ok in rows:
        table.add_row(name, f"{ours:.2f}", base, f"{speedup:.1f}x" if speedup else "-", target,
                      "-" if ok is None else ("yes" if ok else "NO"))
    console.print(table)
    console.print(f"cores: {os.cpu_count()}, python {sys.version.split()[0]}, "
                  f"total {time.perf_counter() - started:.0f} s; load average "
                  f"{os.getloadavg()[0]:.1f} (at start {load_at_start:.1f})")


if __name__ == "__main__":
    main()
