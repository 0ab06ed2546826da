"""``proofgym validate``: passes on every bundled env, fails with a clear row on a broken grader."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import gymnasium
import orjson
import pytest

from proofgym import (
    InProcessRuntime,
    Task,
    TaskSet,
    TaskSpec,
    TurnCompleteAction,
    UniversalVerifiableEnv,
    Verdict,
)
from proofgym.envs import BUNDLED
from proofgym.eval.validate import validate, validate_env
from tests.conftest import REPO

SANDBOXED_TASKS = 1

# A deliberately broken task family, importable by the CLI subprocess too (written to a tmp module).
BROKEN_ENV = textwrap.dedent('''
    import gymnasium
    from proofgym import InProcessRuntime, Task, TaskSet, TaskSpec, TurnCompleteAction, UniversalVerifiableEnv

    class LenientTask(Task):
        """Accepts an answer when the right number appears anywhere: a hedge scores 1."""
        def __init__(self, i):
            self.i = i
        @property
        def id(self):
            return f"lenient-{self.i}"
        def get_spec(self):
            return TaskSpec(f"What is {self.i} + 1?")
        def verify(self, trace, runtime):
            return float(str(self.i + 1) in (trace.final_message() or ""))
        def reference_solution(self):
            return [TurnCompleteAction(str(self.i + 1))]
        def controls(self):
            return {"known_wrong": [TurnCompleteAction(str(self.i + 2))],
                    "hedge": [TurnCompleteAction(f"{self.i + 1} or {self.i + 2}")]}

    def make_env():
        return UniversalVerifiableEnv(InProcessRuntime([]), max_turns=1,
                                      tasks=TaskSet(LenientTask(i) for i in range(3)))

    if "BrokenGrader-v0" not in gymnasium.registry:
        gymnasium.register("BrokenGrader-v0", entry_point=make_env)
''')


@pytest.mark.slow
@pytest.mark.parametrize("env_id", sorted(BUNDLED))
def test_every_bundled_env_passes_validation(cli, env_id, tmp_path):
    # sandboxed envs (a grading is a fresh sandbox, hidden tests and mutants) validate fewer tasks
    # here: their own suites check more (CodeRepair every control of every task, RepoRepair a
    # sample across projects: tests/verify/sandboxed/, tests/envs/test_repo_repair.py)
    sandboxed = "CodeRepair" in env_id or "RepoRepair" in env_id
    n = SANDBOXED_TASKS if sandboxed else 12
    out = tmp_path / "validation.json"
    # a sandboxed task grades in ~3 s (real and mutant tests, one process each), twice per check:
    # two of its controls here, an honest failure and a tampering one (every control of every
    # task is played in the suites named above; CodeRepair's 22 here took 75 s of CI)
    tampering = "conftest_force_pass" if "CodeRepair" in env_id else "delete_failing_tests"
    chosen = ["--control", "no_op", "--control", tampering] if sandboxed else []
    proc = cli("validate", env_id, "-n", str(n), *chosen, "--json", str(out), timeout=900)
    assert "grader validation passed" in proc.stdout
    result = orjson.loads(out.read_bytes())
    assert result["ok"] is True and result["tasks"] == n
    names = [c["name"] for c in result["checks"]]
    assert names[:3] == ["reference", "do_nothing", "no_action"]
    assert "same_verdict_twice" in names and "ships_controls" in names
    assert sum(n.startswith("control:") for n in names) >= 2, "bundled envs ship controls"
    assert all(c["passed"] == c["tasks"] == n for c in result["checks"])


def test_validate_plays_only_the_chosen_controls_and_refuses_an_unknown_one(tmp_path):
    (tmp_path / "broken_env.py").write_text(BROKEN_ENV)
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{tmp_path}", "COLUMNS": "200"}
    out = tmp_path / "v.json"
    proc = subprocess.run([sys.executable, "-m", "proofgym", "validate", "broken_env:BrokenGrader-v0",
                           "--control", "known_wrong", "--json", str(out)],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr  # the lenient hedge is not played
    names = [c["name"] for c in orjson.loads(out.read_bytes())["checks"]]
    assert "control:known_wrong" in names and "control:hedge" not in names, names
    assert "reference" in names and "ships_controls" in names
    proc = subprocess.run([sys.executable, "-m", "proofgym", "validate", "broken_env:BrokenGrader-v0",
                           "--control", "hedg"], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "no task to validate ships a control named 'hedg'; their controls: hedge, known_wrong" in \
        " ".join((proc.stdout + proc.stderr).split())


def test_a_broken_control_fails_with_a_clear_row(tmp_path):
    (tmp_path / "broken_env.py").write_text(BROKEN_ENV)
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{tmp_path}", "COLUMNS": "200"}
    proc = subprocess.run([sys.executable, "-m", "proofgym", "validate", "broken_env:BrokenGrader-v0"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    rows = {line.split("│")[1].strip(): line for line in proc.stdout.splitlines()
            if line.startswith("│") and line.split("│")[1].strip()}
    hedge = [c.strip() for c in rows["control:hedge"].split("│")[1:-1]]
    assert hedge == ["control:hedge", "= 0", "3", "0", "3", "lenient-0, lenient-1, lenient-2"]
    known = [c.strip() for c in rows["control:known_wrong"].split("│")[1:-1]]
    assert known[2:5] == ["3", "3", "0"]
    assert "FAIL control:hedge · lenient-0: scored 1, expected 0" in proc.stdout
    assert "grader validation FAILED: control:hedge" in proc.stdout


class _Answer(Task):
    def __init__(self, i: int, grader) -> None:
        self.i, self._grader = i, grader

    @property
    def id(self) -> str:
        return f"t{self.i}"

    def get_spec(self) -> TaskSpec:
        return TaskSpec("Say yes.")

    def verify(self, trace, runtime):
        return self._grader(self, trace.final_message() or "")

    def reference_solution(self):
        return [TurnCompleteAction("yes")]

    def controls(self):
        return {"no": [TurnCompleteAction("no")]}


def _env(tasks):
    return UniversalVerifiableEnv(InProcessRuntime([]), max_turns=1, tasks=TaskSet(tasks))


def test_grader_errors_nondeterminism_and_missing_parts_are_failures():
    def crashes_on_no(task, message):
        if message == "no":
            raise RuntimeError("grader bug")
        return float(message == "yes")

    # graders made here do not pickle into worker processes: graded on threads here
    tasks = [_Answer(0, crashes_on_no)]
    report = validate_env(_env(tasks), tasks, verifier="inline")
    rows = {c.name: c for c in report.checks}
    assert not report.ok
    assert rows["reference"].ok and rows["do_nothing"].ok
    assert rows["control:no"].failures[0][0] == "t0"
    assert "grader error: RuntimeError: grader bug" in rows["control:no"].failures[0][1]

    calls = iter(range(1000))

    def flaky(task, message):  # a different reward every time it grades
        return Verdict(float(message == "yes"), metrics={"call": float(next(calls))})

    tasks = [_Answer(1, flaky)]
    rows = {c.name: c for c in validate_env(_env(tasks), tasks, verifier="inline").checks}
    assert rows["reference"].ok and not rows["same_verdict_twice"].ok
    assert rows["same_verdict_twice"].failures[0][0] == "t1"
    assert "metrics.call 0.0 then 1.0" in rows["same_verdict_twice"].failures[0][1]

    def timed(task, message):  # durations differ between gradings by nature: not a failure
        return Verdict(float(message == "yes"), metrics={"test_run_s": float(next(calls))})

    tasks = [_Answer(3, timed)]
    assert validate_env(_env(tasks), tasks, verifier="inline").ok

    class Bare(_Answer):
        def reference_solution(self):
            return None

        def controls(self):
            return {}

    tasks = [Bare(2, lambda task, m: float(m == "yes"))]
    rows = {c.name: c for c in validate_env(_env(tasks), tasks, verifier="inline").checks}
    assert "has no reference solution" in rows["reference"].failures[0][1]
    assert rows["ships_controls"].failures == [("t2", "the task ships no negative controls")]


def test_validate_library_limits_and_selects_tasks():
    report = validate("proofgym/Guess-v0", limit=3)
    assert report.ok and report.tasks == 3
    report = validate("proofgym/Guess-v0", task_ids=["guess-s0-00007"])
    assert report.ok and report.tasks == 1
    assert gymnasium.registry  # the bundled registrations are untouched


# ------------------------------------------------- graders that hang or kill their process
#: The reason each fault of tests/faulty_graders.py leaves in the failing rows.
FAULT_REASONS = {"hang": "did not finish within the 2 s timeout",
                 "segfault": "killed by signal SIGSEGV", "exit": "died (exit code 1)"}


@pytest.mark.parametrize("fault", sorted(FAULT_REASONS))
def test_validate_fails_a_grader_that_hangs_segfaults_or_exits_with_the_reason(cli, fault):
    started = time.monotonic()
    # 4 checks (reference, do_nothing, no_action, a control); a grader that is not stopped sleeps
    # an hour, and one that takes validate down leaves no table
    proc = cli("validate", "tests.faulty_graders:Faulty-v0", "--env-arg", f"fault={fault}",
               "--grader-timeout", "2", check=False, timeout=240)
    elapsed = time.monotonic() - started
    assert proc.returncode == 1, proc.stdout + proc.stderr
    rows = ("reference", "do_nothing", "no_action", "control:says_no")
    if fault == "hang":  # one timeout per task: after it, the task's other checks are not graded
        assert f"FAIL reference · faulty-hang: grader error: the grader {FAULT_REASONS[fault]}" in proc.stdout
        for row in rows[1:]:
            assert (f"FAIL {row} · faulty-hang: not graded: this task's grader ran past the timeout "
                    "on reference") in proc.stdout, proc.stdout
        assert proc.stdout.count(FAULT_REASONS[fault]) == 1, proc.stdout
    else:  # a crash costs no timeout: every check is graded, in a fresh worker each time
        for row in rows:
            assert f"FAIL {row} · faulty-{fault}: grader error: " in proc.stdout, proc.stdout
        assert proc.stdout.count(FAULT_REASONS[fault]) == 4, proc.stdout
    assert "FAIL same_verdict_twice · faulty-" in proc.stdout  # not checked is not a pass
    assert "grader validation FAILED: reference, do_nothing, no_action, control:says_no, " \
           "same_verdict_twice" in proc.stdout.replace("\n", " ")
    assert elapsed < 200, f"validate took {elapsed:.0f} s"


def test_validate_library_inline_times_out_a_hanging_grader():
    from tests.faulty_graders import FaultyTask, make_env

    started = time.monotonic()
    report = validate_env(make_env("hang"), [FaultyTask("hang")], verifier="inline", grader_timeout_s=1.0)
    assert time.monotonic() - started < 60
    rows = {c.name: c for c in report.checks}
    assert not report.ok
    problem = rows["reference"].failures[0][1]
    assert "grader error: the grader did not finish within the 1 s timeout" in problem
    ok = [FaultyTask("ok")]
    assert validate_env(make_env("ok"), ok, verifier="process", grader_timeout_s=30.0).ok


def test_validate_library_isolates_a_grader_that_kills_its_process_by_default():
    # as `proofgym validate` does: with threads here (the library's default before), os._exit
    # in the grader ended this process; now it is the reason of an error row
    report = validate("tests.faulty_graders:Faulty-v0", env_kwargs={"fault": "exit"}, concurrency=1,
                      grader_timeout_s=30.0)
    rows = {c.name: c for c in report.checks}
    assert not report.ok
    for row in ("reference", "do_nothing", "no_action", "control:says_no"):
        (task_id, problem), = rows[row].failures
        assert task_id == "faulty-exit" and "grader error: " in problem and "died (exit code 1)" in problem
