"""How the report scales: render time, file size and browser load time, 100 vs 10,000 episodes.

Synthesises runs by repeating the records of a small real Arith-v0 run (so every transcript is
realistic), renders ``report.html`` for each, and loads it in headless Chromium (``--dump-dom``
waits for the page's script). The 100-episode run is the baseline measured in the same process;
the table shows how much each size costs relative to it.

    python bench/report_scale.py [--sizes 100 1000 10000]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import load1, load_line

from proofgym.eval import evaluate, load_run, render_report, summary_of
from proofgym.record import trajectory_id_for
from proofgym.rollout import RandomPolicy

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def synthesize(records: list[dict], n: int, out: Path) -> None:
    out.mkdir(parents=True)
    with (out / "trajectories.jsonl").open("wb") as f:
        for i in range(n):
            record = dict(records[i % len(records)])
            record["task_id"] = f"task-{i // 4:05d}"
            record["trajectory_id"] = trajectory_id_for(None, record["task_id"], i % 4)
            record["extra"] = {"attempt": i % 4}
            f.write(orjson.dumps(record) + b"\n")


def browser_load(html: Path, profile: Path) -> tuple[float, int]:
    chromium = shutil.which("chromium")
    if chromium is None:
        return float("nan"), 0
    t0 = time.perf_counter()
    dom = subprocess.run([chromium, *FLAGS, f"--user-data-dir={profile}", "--dump-dom", html.as_uri()],
                         capture_output=True, text=True, timeout=300, check=True).stdout
    return time.perf_counter() - t0, dom.count('<details class="traj"')


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10000])
    args = parser.parse_args()
    load_start = load1()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        evaluate("proofgym/Arith-v0", RandomPolicy(seed=0), episodes=40, out=root / "seed")
        lines = (root / "seed" / "trajectories.jsonl").read_bytes().splitlines()
        records = [orjson.loads(line) for line in lines]
        rows = []
        for n in args.sizes:
            run_dir = root / f"run-{n}"
            synthesize(records, n, run_dir)
            run = load_run(run_dir)
            t0 = time.perf_counter()
            summary = summary_of(run)  # what `proofgym report` computes
            t1 = time.perf_counter()
            html = render_report(run, summary)
            t2 = time.perf_counter()
            (run_dir / "report.html").write_text(html)
            load_s, shown = browser_load(run_dir / "report.html", root / f"profile-{n}")
            rows.append((n, t1 - t0, t2 - t1, len(html.encode()) / 1e6, load_s, shown))
    base = rows[0]
    print(f"{'episodes':>9} {'metrics s':>10} {'render s':>9} {'size MB':>8} {'browser s':>10} "
          f"{'x base':>7} {'shown':>6}")
    for n, metrics_s, render_s, size, load_s, shown in rows:
        print(f"{n:>9} {metrics_s:>10.3f} {render_s:>9.3f} {size:>8.2f} {load_s:>10.2f} "
              f"{load_s / base[4]:>7.2f} {shown:>6}")
    print(f"baseline: the {base[0]}-episode run measured above (browser time includes Chromium's start)")
    print(load_line(load_start))


if __name__ == "__main__":
    main()
