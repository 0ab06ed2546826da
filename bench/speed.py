"""Every speed row of issue 21 against its target, in one table.

    python bench/speed.py            # the targets' sizes (run it alone on the machine)
    python bench/speed.py --quick    # a smoke size of every row (a minute or two)
    python bench/speed.py --only bash_round_trip,cold_reset   # some rows (the rest: "not run")
    python bench/speed.py --list     # the row keys
    python bench/speed.py --only code_repair_cpu --code-repair-tasks 4   # (was code_repair_grading.py)

Each probe runs in a fresh interpreter (bench/harness.py): its own sandboxes, grader pool and
scripted model server, nothing warmed by another row. Rows (sizes: full / --quick):

* cold sandbox reset: ``SandboxRuntime(prestart=False)`` (no pre-booted spare), an episode
  that changes a file, then ``reset()`` + ``start()`` until the shell answers; median of 30 / 8,
  over a 1,000-file snapshot and over a CodeRepair task's repository.
* ``bash: true`` round trip: ``execute("bash", {"command": "true"})`` into a live sandbox,
  median of 300 / 100 after 20 untimed.
* CodeRepair grading: each task's reference fix (played with the file tools in a CodeRepair
  env), graded by ``VerificationJob.run()`` (the task's own grader: a fresh sandbox, hidden
  tests and mutants); the first job is graded once untimed first; median CPU (the whole process
  tree, sandboxes included) and wall over the 16 tasks / 2.
* verifier start-up: a fresh default ``VerifierPool()`` (what ``proofgym eval`` makes); a job
  submitted 200 ms later (one model-bound episode) until its verdict, against the steady-state
  time per verdict (median of the 20 / 8 jobs after it, one at a time). And what ``evaluate()``
  books as ``verify_s`` in the run records (128 / 32 episodes, c=16, 200 ms/call, its own pool,
  in its own probe): its largest, which includes any wait for the pool's start-up, against the
  steady-state time per verdict.
* model-bound eval: ``proofgym eval proofgym/Arith-v0`` (the CLI, a fresh interpreter: the wall
  time of the whole command) against the scripted OpenAI server at 200 ms per call, 500 / 100
  episodes, c=16, every task answered in one call: of ideal = episodes/s / (16 / 0.2 s).
  bench/peers.py's proofgym side (``proofgym_cli``), as its model-bound row.
* CLI vs in process: the same run through ``evaluate()`` in an interpreter that has imported
  proofgym (``peers.proofgym_in_process``: timed from making the policy to its return), in its
  own probe with its own server; the gap of the two walls.
* out-of-band verification efficiency: bench/throughput.py's definition: the ledger workload
  (6 calls x 100 ms per episode, a grader that waits half the model time + 3 ms CPU), c=64,
  graded out of band by a process pool; episodes/s over ideal (c / model time per episode),
  1,000 / 120 episodes.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import Bench, Result, Row, Target, Value, median, timed
from sandbox import make_tree, resets, round_trips, scratch

ROOT = Path(__file__).resolve().parents[1]
MODEL_BOUND = {"episodes": 500, "quick": 100, "concurrency": 16, "latency": 0.2}


def probe_cold_reset(args: argparse.Namespace) -> Mapping[str, Value]:
    from proofgym.envs.code_repair import code_repair_tasks

    n = 8 if args.quick else 30
    task = next(iter(code_repair_tasks()))
    with scratch() as tmp:
        tree = make_tree(tmp / "tree", 1_000)
        return {"cold_reset": resets(tree, tmp, n, args.clock),
                "cold_reset_code_repair": resets(task.repo, tmp, n, args.clock)}


def probe_round_trip(args: argparse.Namespace) -> Mapping[str, Value]:
    with scratch() as tmp:
        value = round_trips(make_tree(tmp / "tree", 1_000), tmp, 100 if args.quick else 300)
    return {"bash_round_trip": value}


# ----------------------------------------------------------------------------------- CodeRepair
def _reference_jobs(tasks: list[Any]) -> list[Any]:
    """Each task's reference fix played in a CodeRepair env, frozen as its verification job."""
    from proofgym import Limits, SandboxRuntime, UniversalVerifiableEnv
    from proofgym.tasks import TaskSet

    env = UniversalVerifiableEnv(SandboxRuntime(prestart=False), max_turns=1, tasks=TaskSet(tasks),
                                 limits=Limits(max_turns=1, max_tool_calls=40))
    jobs = []
    try:
        for task in tasks:
            obs, _ = env.reset(options={"task_id": task.id})
            trace = []
            for action in task.reference_solution():
                obs, _, terminated, truncated, _ = env.step(action)
                trace.append({"action": action, "obs": obs})
                if terminated or truncated:
                    break
            jobs.append(env.verification_job(trace))
    finally:
        env.close()  # no sandbox of the episodes runs while the gradings are timed
    return jobs


def probe_code_repair(args: argparse.Namespace) -> Mapping[str, Value]:
    from proofgym.envs.code_repair import code_repair_tasks

    tasks = list(code_repair_tasks())
    tasks = tasks[:args.code_repair_tasks or (2 if args.quick else len(tasks))]
    jobs = _reference_jobs(tasks)
    assert jobs[0].run().reward == 1.0  # untimed: the sandbox's system, the spawner, imports
    walls, cpus = [], []
    for task, job in zip(tasks, jobs, strict=True):
        with timed(args.clock) as t:
            w0 = time.perf_counter()
            verdict = job.run()
            wall = time.perf_counter() - w0
            time.sleep(0.3)  # the grading sandbox's teardown may finish in the background: count it
        if verdict.reward != 1.0:
            raise SystemExit(f"{task.id}: the reference fix scored {verdict}")
        walls.append(wall)
        cpus.append(t.cpu_s)
    detail = f"median of {len(tasks)} tasks, max {max(cpus):.2f} s"
    return {"code_repair_cpu": Value(median(cpus), "s", detail + f" (CPU: {args.cpu_source})"),
            "code_repair_wall": Value(median(walls), "s", f"median of {len(tasks)} tasks, "
                                                          f"max {max(walls):.2f} s")}


# ------------------------------------------------------------------------------ verifier pool
def _arith_jobs(n: int) -> list[Any]:
    from proofgym import TurnCompleteAction
    from proofgym.envs.arith import make_env

    env = make_env()
    jobs = []
    for task in list(env.tasks)[:n]:
        env.reset(options={"task_id": task.id})
        action = TurnCompleteAction(f"The answer is \\boxed{{{task.answer}}}")
        obs, *_ = env.step(action)
        jobs.append(env.verification_job([{"action": action, "obs": obs}]))
    return jobs


def probe_verifier_startup(args: argparse.Namespace) -> Mapping[str, Value]:
    from proofgym import VerifierPool

    n = 8 if args.quick else 20
    jobs = _arith_jobs(n + 1)
    made = time.perf_counter()
    with VerifierPool() as pool:  # the default: what `proofgym eval` makes
        time.sleep(0.2)  # one model-bound episode before the first verdict is wanted
        submitted = time.perf_counter()
        first = pool.grade_sync(jobs[0], "first")
        first_s = time.perf_counter() - submitted
        steady = []
        for i, job in enumerate(jobs[1:]):
            w0 = time.perf_counter()
            verdict = pool.grade_sync(job, f"steady-{i}")
            steady.append(time.perf_counter() - w0)
            assert verdict.reward == 1.0, verdict
        processes = pool.processes
    assert first.reward == 1.0, first
    steady_s = median(steady)
    return {"verifier_first_verdict": Value(
                (first_s - steady_s) * 1000, "ms",
                f"first verdict {first_s * 1000:.0f} ms after its submission "
                f"({(submitted - made + first_s) * 1000:.0f} ms after the pool was made), {processes} "
                "processes"),
            "verifier_steady": Value(steady_s * 1000, "ms", f"median of {n} Arith (math-verify) jobs, "
                                                            "one at a time, after the first")}


def probe_summary_verify(args: argparse.Namespace) -> Mapping[str, Value]:
    from workload import ServerProcess

    from proofgym.eval import evaluate
    from proofgym.rollout import make_policy

    n = 32 if args.quick else 128
    c, latency = MODEL_BOUND["concurrency"], MODEL_BOUND["latency"]
    with ServerProcess("arith", 400, latency) as url, scratch() as tmp:
        policy = make_policy("openai:scripted", base_url=url, api_key="EMPTY")
        trajectories, summary = evaluate("proofgym/Arith-v0", policy, episodes=n, concurrency=c,
                                         out=tmp / "run")
    booked = [t.timings["verify_s"] for t in trajectories]
    assert summary["mean_reward"] == 1.0, summary["mean_reward"]
    return {"summary_verify_max": Value(
        max(booked) * 1000, "ms", f"summary books verify_s {summary['time']['verify_s']:.2f} s over {n} "
                                  f"episodes (mean {sum(booked) / len(booked) * 1000:.0f} ms, median "
                                  f"{median(booked) * 1000:.0f} ms), c={c}, {latency * 1000:.0f} ms/call")}


def derive_booked_startup(results: Mapping[str, Result]) -> Value:
    booked, steady = results["summary_verify_max"].value, results["verifier_steady"].value
    assert booked is not None and steady is not None
    return Value(booked.value - steady.value, "ms",
                 f"largest booked {booked.value:.0f} ms - steady {steady.value:.1f} ms (separate probes)")


# ----------------------------------------------------------------------------- model-bound eval
def _model_bound_size(args: argparse.Namespace) -> tuple[int, int, float, float]:
    n = MODEL_BOUND["quick"] if args.quick else MODEL_BOUND["episodes"]
    c, latency = MODEL_BOUND["concurrency"], MODEL_BOUND["latency"]
    return n, c, latency, c / latency


def probe_model_bound_cli(args: argparse.Namespace) -> Mapping[str, Value]:
    from peers import proofgym_cli
    from workload import ServerProcess

    n, c, latency, ideal = _model_bound_size(args)
    with ServerProcess("arith", 400, latency) as url:
        r = proofgym_cli(url, n, c)
    assert r["episodes"] == n and r["mean_reward"] == 1.0, r
    eps = n / r["wall_s"]
    return {"model_bound_cli": Value(eps / ideal * 100, "%",
                                     f"{n} episodes in {r['wall_s']:.2f} s ({eps:.1f}/s; ideal "
                                     f"{ideal:.0f}/s), c={c}, {latency * 1000:.0f} ms/call"),
            "cli_wall": Value(r["wall_s"], "s", f"`proofgym eval`, {n} episodes, whole command")}


def probe_in_process(args: argparse.Namespace) -> Mapping[str, Value]:
    from peers import proofgym_in_process
    from workload import ServerProcess

    n, c, latency, ideal = _model_bound_size(args)
    with ServerProcess("arith", 400, latency) as url:
        r = proofgym_in_process(url, n, c)
    assert r["episodes"] == n and r["mean_reward"] == 1.0, r
    return {"in_process_wall": Value(r["wall_s"], "s", f"evaluate(), {n} episodes "
                                                       f"({n / r['wall_s'] / ideal:.1%} of ideal)")}


def derive_cli_gap(results: Mapping[str, Result]) -> Value:
    cli, inproc = results["cli_wall"].value, results["in_process_wall"].value
    assert cli is not None and inproc is not None
    return Value((cli.value / inproc.value - 1) * 100, "+%",
                 f"CLI {cli.value:.2f} s vs evaluate() {inproc.value:.2f} s (separate fresh probes)")


# --------------------------------------------------------------------------- out-of-band grading
def probe_oob(args: argparse.Namespace) -> Mapping[str, Value]:
    from throughput import orchestrated
    from workload import CALLS_PER_EPISODE, ServerProcess

    from proofgym import VerifierPool

    episodes, c, latency, grader_cpu = (120 if args.quick else 1000), 64, 0.1, 0.003
    model_time = CALLS_PER_EPISODE * latency
    ideal = c / model_time
    with ServerProcess("ledger", 200, latency) as url, \
            VerifierPool("process", processes=2, max_in_flight=c) as pool:
        r = asyncio.run(orchestrated(url, episodes, c, model_time / 2, grader_cpu, pool, inline=False))
    return {"oob_efficiency": Value(r["eps"] / ideal * 100, "%",
                                    f"{episodes} episodes, {r['eps']:.1f}/s of ideal {ideal:.1f}/s, "
                                    f"slots busy {r['busy']:.0%}, c={c}")}


PROBES = {"cold_reset": probe_cold_reset, "round_trip": probe_round_trip,
          "code_repair": probe_code_repair, "verifier_startup": probe_verifier_startup,
          "summary_verify": probe_summary_verify, "model_bound_cli": probe_model_bound_cli,
          "in_process": probe_in_process, "oob": probe_oob}

ROWS = [
    Row("cold_reset", "cold sandbox reset, 1,000-file snapshot (prestart=False)",
        Target("<=", 20, "ms"), "cold_reset"),
    Row("cold_reset_code_repair", "cold sandbox reset, a CodeRepair task's repository",
        Target("<=", 20, "ms"), "cold_reset"),
    Row("bash_round_trip", "`bash: true` round trip into a live sandbox", Target("<=", 0.5, "ms"),
        "round_trip"),
    Row("code_repair_cpu", "CodeRepair grading, CPU per grading (sandboxes included)",
        Target("<=", 0.4, "s"), "code_repair"),
    Row("code_repair_wall", "CodeRepair grading, wall per grading", None, "code_repair"),
    Row("verifier_first_verdict", "verifier start-up on the first verdict's path (first - steady)",
        Target("<=", 100, "ms"), "verifier_startup"),
    Row("verifier_steady", "  steady-state time per verdict", None, "verifier_startup"),
    Row("summary_verify_max", "  largest 'verify_s' evaluate() books for an episode", None,
        "summary_verify"),
    Row("summary_verify", "start-up booked as 'verify' (largest booked - steady per verdict)",
        Target("<=", 100, "ms"), derive=derive_booked_startup,
        needs=("summary_verify_max", "verifier_steady")),
    Row("model_bound_cli", "model-bound eval through the CLI, of ideal (c=16, 200 ms/call)",
        Target(">=", 90, "%"), "model_bound_cli"),
    Row("cli_wall", "  the CLI run's wall time", None, "model_bound_cli"),
    Row("in_process_wall", "  the same run through evaluate() in process", None, "in_process"),
    Row("cli_vs_in_process", "CLI vs in-process evaluate() on the same work", Target("<=", 10, "+%"),
        derive=derive_cli_gap, needs=("cli_wall", "in_process_wall")),
    Row("oob_efficiency", "out-of-band verification efficiency (throughput.py's)", Target(">=", 90, "%"),
        "oob"),
]

def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--code-repair-tasks", type=int, default=None, metavar="N",
                        help="grade the first N CodeRepair tasks (default: all 16; --quick: 2)")


BENCH = Bench("issue 21 speed rows", PROBES, ROWS, configure=configure, description=__doc__ or "")


if __name__ == "__main__":
    BENCH.main(__file__)
