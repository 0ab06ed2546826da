"""Probe of the sandbox's two hot paths (issue 21): a cold reset and a ``bash: true`` round trip.

    python bench/sandbox_probe.py [--resets 60] [--calls 3000] [--breakdown]

Cold reset: ``SandboxRuntime(prestart=False)``; each row is ``reset()`` + ``start()`` after an
episode that wrote a file (so the reset retires a used sandbox). Round trip: ``execute("bash",
{"command": "true"})`` in a live sandbox. Prints min / median wall time and CPU time per
operation (this process + the runtime's cgroup + the spawner), with the 1-minute load average
before and after.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from proofgym.runtimes.sandbox import SandboxRuntime


def _stats(walls: list[int], cpus: list[int]) -> str:
    ms = 1e6
    return (f"wall min {min(walls) / ms:7.3f} med {statistics.median(walls) / ms:7.3f} ms | "
            f"cpu min {min(cpus) / ms:7.3f} med {statistics.median(cpus) / ms:7.3f} ms")


def _cpu_ns(rt: SandboxRuntime) -> int:
    """CPU time of everything a reset or call runs: this process, the runtime's cgroup (every
    sandbox process, the spawner's helper for it) and the spawner itself (not in the cgroup)."""
    from proofgym.runtimes.sandbox import namespaces

    total = time.process_time_ns()
    cg = rt._cgroup.cpu_seconds() if rt._cgroup is not None else None
    if cg is not None:
        total += int(cg * 1e9)
    proc = namespaces._spawner._proc
    if proc is not None:
        with open(f"/proc/{proc.pid}/schedstat") as f:
            total += int(f.read().split()[0])
    return total


def cold_resets(tree: Path, n: int, first_call: bool = False) -> tuple[list[int], list[int]]:
    """``first_call``: also the episode's first ``bash: true`` (which waits until the previous
    episode's sandbox is gone)."""
    walls, cpus = [], []
    with SandboxRuntime(tree, prestart=False) as rt:
        rt.execute("bash", {"command": "true"})
        for _ in range(n + 3):
            rt.execute("bash", {"command": "echo x > f.txt"})
            c0, t0 = _cpu_ns(rt), time.perf_counter_ns()
            rt.reset()
            rt.start()
            if first_call:
                assert rt.execute("bash", {"command": "true"}).ok
            walls.append(time.perf_counter_ns() - t0)
            cpus.append(_cpu_ns(rt) - c0)
    return walls[3:], cpus[3:]


def round_trips(tree: Path, n: int, gap_s: float = 0.0) -> tuple[list[int], list[int]]:
    """``gap_s``: a pause before each call (the agent thinking), in which the supervisor starts
    the next call's shell; 0 is a tight loop, where that start is on every call's path."""
    walls, cpus = [], []
    with SandboxRuntime(tree, prestart=False) as rt:
        for _ in range(50):
            rt.execute("bash", {"command": "true"})
        for _ in range(n):
            if gap_s:
                time.sleep(gap_s)
            c0, t0 = _cpu_ns(rt), time.perf_counter_ns()
            r = rt.execute("bash", {"command": "true"})
            walls.append(time.perf_counter_ns() - t0)
            cpus.append(_cpu_ns(rt) - c0)
            assert r.ok, r
    return walls, cpus


def breakdown(tree: Path, n: int) -> None:
    """Wall time per step of a cold boot, by wrapping the steps' functions."""
    from proofgym.runtimes.sandbox import box, bwrap, ids, namespaces, runtime, seccomp, shell

    spent: dict[str, list[int]] = {}

    def wrap(mod, name, label):
        fn = getattr(mod, name)

        def timed(*a, **k):
            t0 = time.perf_counter_ns()
            try:
                return fn(*a, **k)
            finally:
                spent.setdefault(label, []).append(time.perf_counter_ns() - t0)
        setattr(mod, name, timed)
        return fn

    wrap(ids, "lease", "ids.lease")
    wrap(seccomp, "program_fd", "seccomp.program_fd")
    wrap(namespaces, "start", "namespaces.start (fork..exec of bwrap)")
    wrap(bwrap, "_read_info", "bwrap._read_info (bwrap sets up)")
    wrap(bwrap, "_own_upper", "bwrap._own_upper")
    wrap(bwrap, "spawn", "bwrap.spawn (total)")
    wrap(box, "bwrap_argv", "bwrap_argv")
    wrap(shell.SandboxShell, "wait_ready", "shell.wait_ready (supervisor start)")
    wrap(shell.SandboxShell, "kill", "shell.kill (retire old)")
    wrap(box.SandboxHome, "discard", "discard overlay")
    wrap(box.SandboxHome, "overlay", "new overlay dirs")
    wrap(runtime.SandboxRuntime, "reset", "runtime.reset")
    wrap(runtime.SandboxRuntime, "start", "runtime.start")
    with SandboxRuntime(tree, prestart=False) as rt:
        rt.execute("bash", {"command": "true"})
        spent.clear()
        for _ in range(n):
            rt.execute("bash", {"command": "echo x > f.txt"})
            rt.reset()
            rt.start()
    for label, values in spent.items():
        print(f"  {label:45s} n={len(values):4d} min {min(values) / 1e6:7.3f} "
              f"med {statistics.median(values) / 1e6:7.3f} ms")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--resets", type=int, default=60)
    p.add_argument("--calls", type=int, default=3000)
    p.add_argument("--breakdown", action="store_true")
    args = p.parse_args()
    import proofgym
    print(f"proofgym from {Path(proofgym.__file__).parent}, euid {os.geteuid()}")
    print(f"load before: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        for i in range(100):
            (tree / f"d{i // 10}").mkdir(parents=True, exist_ok=True)
            (tree / f"d{i // 10}" / f"f{i}.py").write_text(f"X = {i}\n")
        if args.breakdown:
            breakdown(tree, args.resets)
        else:
            w, c = cold_resets(tree, args.resets)
            print(f"cold reset   n={len(w)}: {_stats(w, c)}")
            w, c = cold_resets(tree, args.resets, first_call=True)
            print(f"cold reset + first call n={len(w)}: {_stats(w, c)}")
            w, c = round_trips(tree, args.calls)
            print(f"bash: true   n={len(w)}: {_stats(w, c)}  (tight loop)")
            w, c = round_trips(tree, max(50, args.calls // 10), gap_s=0.01)
            print(f"bash: true   n={len(w)}: {_stats(w, c)}  (10 ms pause before each call)")
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
