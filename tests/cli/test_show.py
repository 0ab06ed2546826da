"""Issue 24: following a run and reading a trajectory in a terminal: ``proofgym show`` and eval's
progress lines off a terminal."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_cli

from proofgym.eval import evaluate
from proofgym.rollout import ControlPolicy, RandomPolicy

ARITH = "proofgym/Arith-v0"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("show")
    evaluate(ARITH, RandomPolicy(3), episodes=4, out=tmp / "random", verifier="inline")
    evaluate(ARITH, ControlPolicy("known_wrong"), episodes=2, repeats=2, out=tmp / "wrong",
             verifier="inline")
    return tmp


def test_show_lists_every_episode(runs: Path) -> None:
    proc = run_cli("show", str(runs / "random"))
    lines = proc.stdout.splitlines()
    assert len(lines) == 1 + 4 and "reward" in lines[0]
    assert all(line.split()[0] == str(i) for i, line in enumerate(lines[1:], 1))
    assert all("terminated" in line or "truncated" in line for line in lines[1:])


def test_show_prints_tool_calls_observations_and_the_verdict(runs: Path) -> None:
    from proofgym.record.rundir import load_run

    trajs = load_run(runs / "random").trajectories
    # the random policy's episode with a tool call: shown with its name, arguments and error kind
    n, traj = next((i, t) for i, t in enumerate(trajs, 1) if any(
        getattr(s.action, "tool_name", None) for s in t.steps))
    out = run_cli("show", str(runs / "random"), str(n), "--max-chars", "0").stdout
    assert out.startswith(f"=== {traj.trajectory_id}")
    assert traj.prompt.splitlines()[0] in out
    call = next(s for s in traj.steps if getattr(s.action, "tool_name", None))
    assert f"tool call {call.action.tool_name}(" in out
    assert call.observation["observation"].splitlines()[0] in out
    if call.info.get("error_kind"):
        assert f"(error: {call.info['error_kind']})" in out
    assert "[verdict]" in out and f"grader {traj.verdict.grader}" in out
    assert "components: correct=0" in out


def test_show_by_trajectory_id_and_by_task_id(runs: Path) -> None:
    from proofgym.record.rundir import load_run

    trajs = load_run(runs / "wrong").trajectories
    first = trajs[0]
    by_id = run_cli("show", str(runs / "wrong"), first.trajectory_id).stdout
    assert by_id.count("=== ") == 1 and first.trajectory_id in by_id
    short = first.trajectory_id.partition("/")[2]
    assert run_cli("show", str(runs / "wrong"), short).stdout == by_id
    by_task = run_cli("show", str(runs / "wrong"), first.task_id).stdout
    attempts = [t for t in trajs if t.task_id == first.task_id]
    assert len(attempts) == 2 and by_task.count("=== ") == 2  # every attempt (-G 2)
    assert all(t.trajectory_id in by_task for t in attempts)


def test_show_cuts_long_text_and_says_how_to_see_it(runs: Path) -> None:
    out = run_cli("show", str(runs / "random"), "1", "--max-chars", "20").stdout
    assert "more characters; --max-chars 0 shows all" in out


@pytest.mark.parametrize(("args", "says"), [
    (["{run}", "nope"], "is no episode number"),
    (["{run}", "99"], "is no episode number"),
    (["{tmp}/missing"], "not a run"),
])
def test_show_bad_selector_is_a_usage_error(runs: Path, args, says) -> None:
    proc = run_cli("show", *[a.format(run=runs / "random", tmp=runs) for a in args], check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert says in " ".join(proc.stderr.split())


def test_eval_off_a_terminal_prints_progress_lines(tmp_path) -> None:
    proc = run_cli("eval", ARITH, "-n", "20", "--out", str(tmp_path / "run"))
    lines = [line for line in proc.stdout.splitlines() if line.startswith("episodes ")]
    assert f"{ARITH} · reference: 20 episodes" in proc.stdout
    assert lines and lines[-1].startswith("episodes 20/20 done")
    done = [int(line.split()[1].split("/")[0]) for line in lines]
    assert done == sorted(done) and len(set(done)) == len(done)  # each count once, in order
    assert proc.stdout.index(lines[-1]) < proc.stdout.index("mean_reward")  # before the table
