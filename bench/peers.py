"""proofgym against its peers' current releases on the same work: single-turn Arith tasks answered
by the same scripted OpenAI-compatible server, at the same concurrency.

    python bench/peers.py [--rows framework,model] [--venvs DIR] [--quick]

Two rows (the issue's targets):

* framework-bound: 1,000 episodes at concurrency 64, 100 ms per model call (target: proofgym
  >= 3x each peer);
* model-bound: 500 episodes at concurrency 16, 200 ms per model call (target: proofgym >= 90%
  of ideal = concurrency / latency).

``--quick`` runs a fifth of the episodes (a few minutes in all; the ratios, not the targets'
absolute episode counts).

proofgym runs through ``proofgym eval`` itself (a fresh interpreter, the wall time of the whole
command), and in process (``proofgym.eval.evaluate`` with a fresh grader pool, timed the same
way) to show what the CLI adds. The peers run each in its own virtualenv under ``--venvs``
(never vendored here; ``bench/peers_venvs.sh DIR`` creates them):

* ``verifiers`` 0.4 (``DIR/vf04``): ``vf-eval vf_arith`` with the v1 Taskset of
  ``bench/vf_arith`` (same tasks and answer check), its ``null`` harness (a plain chat program,
  no tools) on the ``subprocess`` runtime, ``-c`` = concurrency, the client pointed at the
  scripted server. Its first run installs ``uv`` (``pip install --user uv``) and the chat
  program's environment; an untimed two-episode run does that before each measured row.
* ``inspect_ai`` (``DIR/inspect``): ``inspect eval bench/inspect_arith.py`` with its
  OpenAI-compatible provider pointed at the scripted server, ``--max-connections`` = concurrency.

Each side's time is the wall time of its whole command, start-up included, as a user sees it.
(``verifiers`` 0.2.1's ``SingleTurnEnv`` row is not kept: its adapter is in git history,
bench/verifiers_side.py, and would need a third virtualenv.)

The server answers every task in one message, ``\\boxed{answer}``; proofgym grades with
math-verify, the peers with their own scorers (noted in the table). A missing venv skips its row
with a message. The scripted server is one process with its own core: if it were the bottleneck
it would be so for every row alike (its own time per request is printed at the end).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import Target, Value, in_one_run, load1, load_line, render_table
from rich.console import Console
from rich.table import Table
from workload import ServerProcess

console = Console(width=140)
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
N_TASKS = 400  # proofgym/Arith-v0's default task set, served by the scripted server
ROWS = {"framework": (1000, 64, 0.1), "model": (500, 16, 0.2)}


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
            "OPENAI_API_KEY": "EMPTY", "PEERS_API_KEY": "EMPTY"}


def proofgym_cli(base_url: str, n: int, c: int) -> dict[str, float]:
    """``proofgym eval`` in a fresh interpreter; wall time of the whole command."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        argv = [sys.executable, "-m", "proofgym.cli.main", "eval", "proofgym/Arith-v0",
                "--policy", "openai:scripted", "--base-url", base_url, "-n", str(n), "-c", str(c),
                "--grader-jobs", str(c), "--out", str(out)]
        started = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, text=True, env=_env(), timeout=1200)
        wall = time.perf_counter() - started
        if proc.returncode != 0:
            raise SystemExit(f"proofgym eval failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        summary = json.loads((out / "summary.json").read_text())
    return {"episodes": summary["episodes"], "wall_s": wall, "mean_reward": summary["mean_reward"]}


def proofgym_in_process(base_url: str, n: int, c: int) -> dict[str, float]:
    """The same run through ``evaluate`` in an interpreter that has already imported proofgym:
    a fresh grader pool and run directory, timed from the call to its return."""
    code = f"""
import json, sys, tempfile, time
from pathlib import Path
import proofgym
from proofgym.eval import evaluate
from proofgym.rollout import make_policy
from proofgym import VerifierPool
if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        policy = make_policy("openai:scripted", base_url={base_url!r}, api_key="EMPTY")
        with VerifierPool("process", processes=2, max_in_flight={c}) as pool:
            _, summary = evaluate("proofgym/Arith-v0", policy, episodes={n}, concurrency={c},
                                  verifier=pool, out=Path(tmp) / "run")
        wall = time.perf_counter() - started
    print(json.dumps({{"episodes": summary["episodes"], "wall_s": wall,
                      "mean_reward": summary["mean_reward"]}}))
"""
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(code)
    try:
        proc = subprocess.run([sys.executable, f.name], capture_output=True, text=True, env=_env(),
                              timeout=1200)
    finally:
        os.unlink(f.name)
    if proc.returncode != 0:
        raise SystemExit(f"in-process proofgym failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _tasks_file(tmp: str, n: int) -> str:
    from proofgym.envs.arith import arith_tasks
    from proofgym.record import trajectory_id_for

    tasks = list(arith_tasks(N_TASKS))
    # the peer's samples carry the ids proofgym would give the same episodes
    rows = [{"id": trajectory_id_for(None, tasks[i % N_TASKS].id, i // N_TASKS),
             "prompt": tasks[i % N_TASKS].get_spec().prompt,
             "answer": str(tasks[i % N_TASKS].answer)} for i in range(n)]
    path = os.path.join(tmp, "tasks.json")
    with open(path, "w") as f:
        json.dump(rows, f)
    return path


def inspect_side(venv: Path, base_url: str, n: int, c: int) -> dict[str, float] | str:
    inspect = venv / "bin" / "inspect"
    if not inspect.exists():
        return f"no virtualenv at {venv} (see --help)"
    with tempfile.TemporaryDirectory() as tmp:
        tasks = _tasks_file(tmp, n)
        env = {**os.environ, "PEERS_TASKS": tasks, "SCRIPTED_BASE_URL": base_url,
               "SCRIPTED_API_KEY": "EMPTY"}
        argv = [str(inspect), "eval", "inspect_arith.py",  # relative: inspect globs it from cwd
                "--model", "openai-api/scripted/scripted",
                "--max-connections", str(c), "--max-samples", str(c),
                "--max-retries", "0", "--log-dir", os.path.join(tmp, "logs"), "--log-format", "json",
                "--display", "none"]
        started = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=1800, env=env, cwd=HERE)
        wall = time.perf_counter() - started
        if proc.returncode != 0:
            return f"failed: {(proc.stderr or proc.stdout).strip()[-1500:]}"
        logs = sorted(Path(tmp, "logs").glob("*.json"))
        log = json.loads(logs[-1].read_text())
    if log.get("status") != "success":
        error = log.get("error") or {}
        return (f"inspect eval ended {log.get('status')}: {error.get('message')} "
                f"{(error.get('traceback') or '')[-800:]}")
    results = log.get("results") or {}
    scores = results.get("scores") or [{}]
    accuracy = next(iter((scores[0].get("metrics") or {}).values()), {}).get("value")
    version = log.get("eval", {}).get("packages", {}).get("inspect_ai", "?")
    return {"episodes": results.get("completed_samples", results.get("total_samples", 0)), "wall_s": wall,
            "mean_reward": accuracy if accuracy is not None else float("nan"), "version": version}


def verifiers_side(venv: Path, base_url: str, n: int, c: int) -> dict[str, float] | str:
    vf_eval = venv / "bin" / "vf-eval"
    if not vf_eval.exists():
        return f"no virtualenv at {venv} (bench/peers_venvs.sh)"
    version = subprocess.run([str(venv / "bin" / "python"), "-c",
                              "import verifiers; print(verifiers.__version__)"],
                             capture_output=True, text=True).stdout.strip()

    def run(tmp: str, count: int) -> tuple[float, subprocess.CompletedProcess[str]]:
        env = {**os.environ, "PEERS_TASKS": _tasks_file(tmp, count), "PYTHONPATH": str(HERE),
               "SCRIPTED_API_KEY": "EMPTY"}
        argv = [str(vf_eval), "vf_arith", "--env.agent.harness.id", "null",
                "--env.agent.runtime.type", "subprocess", "-m", "scripted",
                "--client.base-url", base_url, "--client.api-key-var", "SCRIPTED_API_KEY",
                "-c", str(c), "-n", str(count), "--no-push", "-o", os.path.join(tmp, "out")]
        started = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=3600, env=env, cwd=tmp)
        return time.perf_counter() - started, proc

    with tempfile.TemporaryDirectory() as warm:  # uv and the chat program's environment
        run(warm, 2)
    with tempfile.TemporaryDirectory() as tmp:
        wall, proc = run(tmp, n)
        if proc.returncode != 0:
            return f"failed: {(proc.stderr or proc.stdout).strip()[-1500:]}"
        rewards = []
        for path in Path(tmp, "out").glob("*/traces.jsonl"):
            for line in path.read_text().splitlines():
                episode = json.loads(line)
                rewards.append(sum(r["score"] * r["weight"] for t in episode["traces"]
                                   for r in (t.get("rewards") or {}).values()))
    if len(rewards) != n:
        return f"vf-eval wrote {len(rewards)} of {n} episodes: {proc.stdout[-800:]}"
    return {"episodes": n, "wall_s": wall, "mean_reward": sum(rewards) / n, "version": version}


def measure(server: ServerProcess, run: Callable[..., dict[str, float] | str],
            *args: Any) -> dict[str, float] | str:
    """One side, with the scripted server's CPU per episode while it ran (the server is one
    process: if it were the bottleneck, it would cap every side alike)."""
    before = server.cpu_s()
    result = run(*args)
    if isinstance(result, dict) and result["episodes"]:
        result["server_ms"] = (server.cpu_s() - before) / result["episodes"] * 1000
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", default="framework,model", help="framework, model or both")
    parser.add_argument("--venvs", type=Path,
                        default=Path(os.environ.get("PEERS_VENVS", ROOT / ".peers-venvs")),
                        help="where bench/peers_venvs.sh made the peers' virtualenvs")
    parser.add_argument("--episodes", type=int, default=None, help="override the rows' episode counts")
    parser.add_argument("--quick", action="store_true", help="a fifth of each row's episodes")
    args = parser.parse_args()
    started, load_start = time.perf_counter(), load1()
    console.print(f"load average at start {os.getloadavg()} on {os.cpu_count()} cores")
    verdicts: list[tuple[str, Value, Target]] = []
    for row in args.rows.split(","):
        n, c, latency = ROWS[row]
        n = args.episodes or (n // 5 if args.quick else n)
        ideal = c / latency
        server = ServerProcess("arith", N_TASKS, latency)
        with server as base_url:
            sides: list[tuple[str, dict[str, float] | str]] = []

            for name, run, *where in (("proofgym eval (CLI, math-verify)", proofgym_cli),
                                      ("proofgym evaluate() in process", proofgym_in_process),
                                      ("verifiers (vf-eval, null harness)", verifiers_side,
                                       args.venvs / "vf04"),
                                      ("inspect_ai (inspect eval)", inspect_side, args.venvs / "inspect")):
                sides.append((name, measure(server, run, *where, base_url, n, c)))
        # the peers' names with the versions that ran
        sides = [(name.replace(" (", f" {r['version']} (", 1) if isinstance(r, dict) and "version" in r
                  else name, r) for name, r in sides]
        table = Table(title=f"{row}-bound: {n} single-turn Arith episodes, concurrency {c}, "
                            f"{latency * 1000:.0f} ms per model call; ideal {ideal:.0f} episodes/s")
        for col in ("framework", "episodes", "wall s", "episodes/s", "of ideal", "mean reward",
                    "server CPU/episode", "proofgym CLI vs it"):
            table.add_column(col, justify="left" if col == "framework" else "right")
        ours = sides[0][1]
        assert isinstance(ours, dict)
        ours_eps = ours["episodes"] / ours["wall_s"]
        for name, r in sides:
            if isinstance(r, str):
                table.add_row(name, "-", "-", "-", "-", "-", "-", r[:60])
                console.print(f"[red]{name}: {r}[/]")
                continue
            eps = r["episodes"] / r["wall_s"]
            table.add_row(name, str(r["episodes"]), f"{r['wall_s']:.2f}", f"{eps:.1f}", f"{eps / ideal:.1%}",
                          f"{r['mean_reward']:.3f}", f"{r.get('server_ms', float('nan')):.2f} ms",
                          f"{ours_eps / eps:.2f}x")
            if name.startswith(("verifiers", "inspect")) and row == "framework":
                verdicts.append((f"framework-bound: proofgym CLI vs {name.split(' (')[0]}",
                                 Value(ours_eps / eps, "x"), Target(">=", 3, "x")))
        inproc = sides[1][1]
        assert isinstance(inproc, dict)
        cli_gap = ours["wall_s"] / inproc["wall_s"] - 1
        verdicts.append((f"{row}-bound: CLI vs evaluate() in process",
                         Value(cli_gap * 100, "+%", f"{ours['wall_s']:.2f} s vs {inproc['wall_s']:.2f} s"),
                         Target("<=", 10, "+%")))
        if row == "model":
            verdicts.append(("model-bound: proofgym CLI, of ideal", Value(ours_eps / ideal * 100, "%"),
                             Target(">=", 90, "%")))
        console.print(table)
        console.print(load_line(load_start))
    print(render_table(in_one_run(verdicts, load_start, load1()),
                       title="targets (every row of this run: the load is the whole run's)"))
    console.print(f"bench wall time {time.perf_counter() - started:.0f} s; load average {os.getloadavg()} "
                  f"on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
