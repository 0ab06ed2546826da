"""The sandbox runtime against the obvious baselines, each row in a fresh process (bench/harness.py).

    python bench/sandbox.py [--quick]   # about a minute on 2 cores (--quick: fewer repeats)

Rows (medians):
  * episode reset, 1,000 and 10,000 file snapshots: ``reset()`` + ``start()`` until a shell
    answers, against ``shutil.copytree`` of the same tree (the copy-per-episode design). Cold
    (``prestart=False``, no spare) is the headline, like-for-like with the copy; warm (the
    prestarted spare is ready because the previous episode lasted longer than a boot) is
    reported without a target, since the copy gets no such head start.
  * tool round trip ``bash: true`` through the persistent shell, against a fresh sandbox (the
    same overlay, mounts and limits) per command.
  * isolated verification: ``run_pytest`` on a bundled task with its reference fix, against the
    same pytest command in an already running sandbox holding the same files (paired, run
    alternately): the difference is what isolation costs (fresh sandbox, files, report, cleanup).

bench/speed.py's sandbox rows (cold reset, round trip) are these functions.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import Bench, Result, Row, Target, Value, median, quantile, timed


def make_tree(root: Path, n_files: int) -> Path:
    for i in range(n_files):
        d = root / f"pkg{i // 100:03d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"mod{i % 100:02d}.py").write_text(f"VALUE_{i} = {i}\n" * 20)
    return root


@contextmanager
def scratch() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="proofgym-bench-"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def median_ms(fn: Callable[[], object], n: int) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return median(times) * 1000


def resets(snapshot: Path, tmp: Path, n: int, clock: Callable[[], float], *,
           prestart: bool = False, think_s: float = 0.0) -> Value:
    """``reset()`` + ``start()`` after an episode that changed and added a file: median wall
    (CPU of the process tree in the detail). ``prestart``: a spare boots during ``think_s``."""
    from proofgym import SandboxRuntime

    walls, cpus = [], []
    with SandboxRuntime(snapshot, prestart=prestart, scratch_dir=tmp) as rt:
        rt.start()
        for _ in range(n):
            rt.execute("bash", {"command": "echo changed >> bench-probe.txt && echo new > new.txt"})
            time.sleep(think_s)
            with timed(clock) as t:  # type: ignore[arg-type]
                rt.reset()
                rt.start()
            walls.append(t.wall_s * 1000)
            cpus.append(t.cpu_s * 1000)
        assert "No such file" in rt.execute("bash", {"command": "cat new.txt 2>&1"}).output
    return Value(median(walls), "ms", f"p90 {quantile(walls, 0.9):.1f} ms, CPU {median(cpus):.1f} ms "
                                      f"(median), n={n}")


def round_trips(snapshot: Path, tmp: Path, n: int) -> Value:
    """``bash: true`` into a live sandbox: the median of ``n`` after 20 untimed."""
    from proofgym import SandboxRuntime

    walls = []
    with SandboxRuntime(snapshot, scratch_dir=tmp) as rt:
        for _ in range(20):
            assert rt.execute("bash", {"command": "true"}).ok
        for _ in range(n):
            w0 = time.perf_counter()
            rt.execute("bash", {"command": "true"})
            walls.append((time.perf_counter() - w0) * 1000)
    return Value(median(walls), "ms", f"p90 {quantile(walls, 0.9):.2f} ms, n={n}")


def _reset_probe(n_files: int) -> Callable[[argparse.Namespace], Mapping[str, Value]]:
    def probe(args: argparse.Namespace) -> Mapping[str, Value]:
        n = 12 if args.quick else 30
        with scratch() as tmp:
            tree = make_tree(tmp / "tree", n_files)
            cold = resets(tree, tmp, n, args.clock)
            # the agent thinking 150 ms: the spare boots meanwhile
            warm = resets(tree, tmp, n, args.clock, prestart=True, think_s=0.15)
            counter = iter(range(10**6))
            copy = median_ms(lambda: shutil.copytree(tree, tmp / "copies" / str(next(counter))),
                             max(5, n // 3))
        k = f"{n_files // 1000}k"
        return {f"reset_cold_{k}": Value(cold.value, "ms", cold.detail + f"; copytree {copy:.1f} ms "
                                                                        f"({copy / cold.value:.1f}x)"),
                f"reset_warm_{k}": warm, f"copytree_{k}": Value(copy, "ms", "shutil.copytree, same tree")}
    return probe


def probe_round_trip(args: argparse.Namespace) -> Mapping[str, Value]:
    from proofgym.runtimes.sandbox import SandboxHome, SandboxLimits

    n = 100 if args.quick else 300
    with scratch() as tmp:
        tree = make_tree(tmp / "tree", 1_000)
        persistent = round_trips(tree, tmp, n)
        home = SandboxHome(SandboxLimits(), parent=tmp)
        try:
            overlay = home.overlay(tree, "fresh")

            def fresh() -> None:
                spawned = home.boot(overlay, ["bash", "-c", "true"], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL)
                spawned.proc.wait()
            fresh_ms = median_ms(fresh, max(10, n // 10))
        finally:
            home.close()
    return {"round_trip": persistent,
            "round_trip_fresh": Value(fresh_ms, "ms", f"a fresh sandbox per command, "
                                                      f"{fresh_ms / persistent.value:.1f}x the live one")}


def probe_verification(args: argparse.Namespace) -> Mapping[str, Value]:
    from proofgym import SandboxRuntime, run_pytest
    from proofgym.envs.code_repair import code_repair_tasks

    n = 8 if args.quick else 25
    task = next(t for t in code_repair_tasks() if t.id == "csv-quoted-fields")
    tests = task.test_files
    diffs = []
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
            run = run_pytest(task.repo, task.solution_files, tests=tests, hidden=task.hidden_files,
                             protected=task.protected)
            isolated = time.perf_counter() - t
            assert run.results and run.report_error is None, run
            t = time.perf_counter()
            rt.execute("bash", {"command": command})
            diffs.append((isolated - (time.perf_counter() - t)) * 1000)
    return {"verification_overhead": Value(median(diffs), "ms", f"{task.id}, paired with the same "
                                                                f"pytest in a running sandbox, n={n}")}


def derive_speedup(results: Mapping[str, Result]) -> Value:
    cold, copy = results["reset_cold_1k"].value, results["copytree_1k"].value
    assert cold is not None and copy is not None
    return Value(copy.value / cold.value, "x", "copytree / cold reset, 1,000 files")


PROBES = {"reset_1k": _reset_probe(1_000), "reset_10k": _reset_probe(10_000),
          "round_trip": probe_round_trip, "verification": probe_verification}
ROWS = [
    Row("reset_cold_1k", "episode reset, 1,000 files, cold (prestart=False)", Target("<=", 20, "ms"),
        "reset_1k"),
    Row("reset_warm_1k", "episode reset, 1,000 files, warm spare (baseline has no head start)", None,
        "reset_1k"),
    Row("copytree_1k", "  baseline: copytree of the 1,000 files", None, "reset_1k"),
    Row("reset_vs_copy_1k", "cold reset vs copytree, 1,000 files", None,
        derive=derive_speedup, needs=("reset_cold_1k", "copytree_1k")),
    Row("reset_cold_10k", "episode reset, 10,000 files, cold (prestart=False)", Target("<=", 20, "ms"),
        "reset_10k"),
    Row("reset_warm_10k", "episode reset, 10,000 files, warm spare", None, "reset_10k"),
    Row("copytree_10k", "  baseline: copytree of the 10,000 files", None, "reset_10k"),
    Row("round_trip", "tool round trip `bash: true`, live sandbox", Target("<=", 0.5, "ms"), "round_trip"),
    Row("round_trip_fresh", "  baseline: a fresh sandbox per command", None, "round_trip"),
    Row("verification_overhead", "isolated verification overhead (run_pytest vs a running sandbox)",
        Target("<=", 50, "ms"), "verification"),
]
BENCH = Bench("sandbox runtime vs baselines (medians)", PROBES, ROWS, description=__doc__ or "")


if __name__ == "__main__":
    BENCH.main(__file__)
