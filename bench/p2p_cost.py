"""What checking the whole stable suite costs: a RepoRepair grading against one native pytest run.

    python bench/p2p_cost.py                 # 20 tasks, one or two per project
    python bench/p2p_cost.py --tasks 2       # a smoke run

Per task (the bundled manifest, sampled across projects with ``--seed``), with the reference
fix applied:

  * grading: ``RepoRepairTask.grade_files`` (hidden fail-to-pass tests one process each with
    their mutants, the pass-to-pass tests, the project's whole stable suite, in one process with
    its canaries; a fresh sandbox, no spare booted ahead): CPU of the whole process tree
    (bench/cputime.py's ``CpuClock``: a ``cpuacct`` cgroup as root, else a lower bound);
  * native: one ``python -m pytest`` of the same tests (fail-to-pass and pass-to-pass) on the
    same source (the task's ``repo/`` with the fix and the hidden test files), with the same
    interpreter (the one the sandbox stages), outside any sandbox: its CPU (a reaped child).

The table gives both and their ratio per task, the medians, and the load average (1/5/15 min)
at the start and the end: compare figures of a quiet machine only. Target: median ratio <= 2.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cputime import CpuClock

from proofgym.envs.repo_repair import MANIFEST, RECIPE, RepoRepairTask
from proofgym.tasks.synth import Recipe, TaskRecord, read_manifest
from proofgym.verify.sandboxed import files_under, keep_no_spares, swebench_verdict

TARGET = 2.0


def sample(records: list[TaskRecord], n: int, seed: int) -> list[TaskRecord]:
    """``n`` records spread over the projects: one per project in turn, in a seeded order."""
    rng = random.Random(seed)
    by_project: dict[str, list[TaskRecord]] = {}
    for record in records:
        by_project.setdefault(record.project, []).append(record)
    for group in by_project.values():
        rng.shuffle(group)
    projects = sorted(by_project)
    rng.shuffle(projects)
    out: list[TaskRecord] = []
    while len(out) < n and any(by_project.values()):
        for name in projects:
            if by_project[name] and len(out) < n:
                out.append(by_project[name].pop())
    return out


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def native(task: RepoRepairTask) -> tuple[float, float, int]:
    """(CPU s, wall s, exit status) of one native pytest run of the task's tests, fixed."""
    import time

    inner = task.inner
    with tempfile.TemporaryDirectory(prefix="p2p-cost-") as tmp:
        work = Path(tmp) / "repo"
        shutil.copytree(inner.repo, work, symlinks=True)
        for path, content in {**files_under(task.root / "solution"), **inner.hidden_files}.items():
            (work / path).parent.mkdir(parents=True, exist_ok=True)
            (work / path).write_bytes(content)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        if task.image is not None:
            # the image's own packages (the sandbox sees them as its site-packages)
            root = task.image.build().root
            extra = [str(p) for p in sorted(Path(root).glob("l*/opt/python/lib/python*/site-packages"))]
            env["PYTHONPATH"] = os.pathsep.join([*extra, env.get("PYTHONPATH", "")])
        tests = [*task.record.fail_to_pass, *task.record.pass_to_pass]
        c0, w0 = _children_cpu(), time.perf_counter()
        done = subprocess.run([sys.executable, "-B", "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               "-c", "pytest.ini", "--rootdir=.", *tests], cwd=work, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        return _children_cpu() - c0, time.perf_counter() - w0, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--manifest", default=str(MANIFEST))
    args = parser.parse_args()
    keep_no_spares()  # a spare booted in the background would land in the next task's CPU
    pins = Recipe.load(RECIPE)
    chosen = sample(read_manifest(args.manifest), args.tasks, args.seed)
    clock = CpuClock()
    console = Console()
    load_start = os.getloadavg()
    table = Table(title=f"grading CPU vs one native pytest run (reference fix), {len(chosen)} tasks")
    for column in ("task", "tests", "grading CPU s", "native CPU s", "ratio", "reward",
                   "native exit"):
        table.add_column(column, justify="right" if column != "task" else "left",
                         no_wrap=column == "task")
    ratios, grading_all, native_all = [], [], []
    for record in chosen:
        task = RepoRepairTask(record, pins.pin_of(record))  # an earlier release's task: its sdist
        fix = files_under(task.root / "solution")  # materialized (fetched) before the clock
        n_cpu, _, status = native(task)
        c0 = clock()
        run = task.grade_files(fix)
        g_cpu = clock() - c0
        verdict = swebench_verdict(run, record.fail_to_pass, record.pass_to_pass)
        ratio = g_cpu / n_cpu if n_cpu > 0 else float("inf")
        ratios.append(ratio)
        grading_all.append(g_cpu)
        native_all.append(n_cpu)
        table.add_row(record.id, str(len(record.fail_to_pass) + len(record.pass_to_pass)),
                      f"{g_cpu:.2f}", f"{n_cpu:.2f}", f"{ratio:.2f}", f"{verdict.reward:g}",
                      str(status))
    median = statistics.median(ratios)
    table.add_row("median", "", f"{statistics.median(grading_all):.2f}",
                  f"{statistics.median(native_all):.2f}",
                  f"{median:.2f} ({'ok' if median <= TARGET else 'over'} target <= {TARGET:g})", "", "")
    console.print(table)
    console.print(f"CPU clock: {clock.source}")
    console.print(f"load average (1/5/15 min): {' / '.join(f'{x:.2f}' for x in load_start)} at start, "
                  f"{' / '.join(f'{x:.2f}' for x in os.getloadavg())} at the end, "
                  f"on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
