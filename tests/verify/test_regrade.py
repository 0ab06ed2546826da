"""Grading: references score 1, known-wrong answers 0, equivalent forms 1, broken graders error."""

from __future__ import annotations

import math
import time

import gymnasium
import pytest

from proofgym import InProcessRuntime, Task, TaskSpec, TurnCompleteAction, UniversalVerifiableEnv, Verdict
from proofgym.envs.arith import arith_tasks, make_task
from proofgym.envs.guess import guess_tasks
from proofgym.rollout import ControlPolicy, ReferencePolicy, run_episode
from proofgym.verify import HedgedAnswer, extract_final_answer, math_equivalent


def test_reference_solutions_score_one_on_every_level():
    env = gymnasium.make("proofgym/Arith-v0").unwrapped
    for task in list(arith_tasks(40)):
        traj = run_episode(env, ReferencePolicy(), task=task, seed=0)
        assert traj.verdict.status == "scored", traj.verdict
        assert traj.reward == 1.0, (task.question, traj.steps[-1].action)
        assert traj.terminated and not traj.truncated


@pytest.mark.parametrize("control", ["known_wrong", "no_answer", "empty", "hedge", "echo_question"])
def test_arith_controls_score_zero(control):
    env = gymnasium.make("proofgym/Arith-v0").unwrapped
    for task in list(arith_tasks(24)):
        traj = run_episode(env, ControlPolicy(control), task=task, seed=0)
        assert traj.verdict.status == "scored"
        assert traj.reward == 0.0, (control, task.id)


@pytest.mark.parametrize("control", ["give_up", "out_of_range", "many_numbers", "claim_success"])
def test_guess_controls_score_zero_and_reference_scores_one(control):
    env = gymnasium.make("proofgym/Guess-v0").unwrapped
    for task in list(guess_tasks(20)):
        assert run_episode(env, ControlPolicy(control), task=task, seed=0).reward == 0.0
        ref = run_episode(env, ReferencePolicy(), task=task, seed=0)
        assert ref.reward == 1.0 and ref.terminated


@pytest.mark.parametrize("form", ["1/2", "0.5", "\\frac{1}{2}", "\\boxed{\\frac{1}{2}}", ".50",
                                  "\\dfrac{1}{2}", "Answer: 1/2"])
def test_equivalent_forms_score_one(form):
    task = make_task(0)
    task = type(task)(task.task_id, task.level, task.question, "1/2", "2*1/4", "3/2")
    env = UniversalVerifiableEnv(InProcessRuntime([]), max_turns=1)
    env.reset(options={"task": task})
    step = env.step(TurnCompleteAction(form))
    verdict = env.verify([{"action": TurnCompleteAction(form), "obs": step[0]}])
    assert verdict.status == "scored" and verdict.reward == 1.0, form


@pytest.mark.parametrize(("gold", "answer", "same"), [
    ("417/16", "26.0625", True), ("-71/6", "-\\frac{71}{6}", True), ("102", "102.0", True),
    ("102", "103", False), ("11/2", "5.4", False), ("3", "x = 3", True), ("-10", "10", False),
])
def test_math_equivalence(gold, answer, same):
    assert math_equivalent(gold, answer) is same


def test_extraction_refuses_hedges():
    assert extract_final_answer("so \\boxed{3}") == "3"
    assert extract_final_answer("\\boxed{3} and again \\boxed{3}") == "3"
    with pytest.raises(HedgedAnswer):
        extract_final_answer("\\boxed{3} or \\boxed{4}")
    assert extract_final_answer("a very long message " * 10) is None


class _Broken(Task):
    def __init__(self, result):
        self.result = result

    @property
    def id(self):
        return "broken"

    def get_spec(self):
        return TaskSpec("anything")

    def verify(self, trace, runtime):
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


@pytest.mark.parametrize(("result", "mentions"), [
    (KeyError("answer_key"), "KeyError"),
    (ZeroDivisionError("division by zero"), "ZeroDivisionError: division by zero"),
    (math.nan, "non-finite"),
    ("1.0", "expected a float or a Verdict"),
    (None, "expected a float or a Verdict"),
    (Verdict(math.inf), "non-finite"),
])
def test_grader_failure_is_an_error_verdict_not_zero(result, mentions):
    env = UniversalVerifiableEnv(InProcessRuntime([]), max_turns=1)
    env.reset(options={"task": _Broken(result)})
    env.step(TurnCompleteAction("x"))
    verdict = env.verify([])
    assert verdict.status == "error"
    assert mentions in verdict.error
    assert not verdict.scored


def test_verify_uses_the_frozen_final_state_after_the_env_moves_on():
    from proofgym.tools import ToolContext, tool

    @tool
    def put(value: str, ctx: ToolContext) -> str:
        """Store a value.

        Args:
            value: The value.
        """
        ctx.state["value"] = value
        return "ok"

    class StateTask(Task):
        @property
        def id(self):
            return "state"

        def get_spec(self):
            return TaskSpec("store 'yes'")

        def verify(self, trace, runtime):
            return 1.0 if runtime.state.get("value") == "yes" else 0.0

    from proofgym import ToolCallAction

    env = UniversalVerifiableEnv(InProcessRuntime([put]), max_turns=1)
    env.reset(options={"task": StateTask()})
    env.step(ToolCallAction("put", {"value": "yes"}))
    env.step(TurnCompleteAction("done"))
    job = env.verification_job([])
    env.reset(options={"task": StateTask()})  # the next episode starts before grading
    env.step(ToolCallAction("put", {"value": "no"}))
    assert job.run().reward == 1.0
    import pickle

    assert pickle.loads(pickle.dumps(job.artifact)) == job.artifact


# ------------------------------------------------- graders that hang or kill their process
#: The reason each fault of tests/faulty_graders.py leaves in its error verdict.
FAULT_REASONS = {"hang": "did not finish within the 3 s timeout",
                 "segfault": "killed by signal SIGSEGV", "exit": "died (exit code 1)"}


@pytest.mark.parametrize("fault", sorted(FAULT_REASONS))
def test_eval_and_verify_record_an_error_verdict_for_a_grader_that_hangs_or_dies(cli, tmp_path, fault):
    """``proofgym eval`` grades through the pool; ``proofgym verify`` on the run must too: a grader
    that segfaults does not take it down (exit -11), one that hangs does not hang it."""
    import orjson

    run = tmp_path / "run"
    faulty = ["tests.faulty_graders:Faulty-v0", "--env-arg", f"fault={fault}"]
    proc = cli("eval", *faulty, "--out", str(run), "--grader-timeout", "3", check=False, timeout=240)
    assert proc.returncode == 3, proc.stdout + proc.stderr  # every episode unscored: over --max-error-rate
    (record,) = [orjson.loads(line) for line in (run / "trajectories.jsonl").read_bytes().splitlines()]
    assert record["status"] == "ok" and record["reward"] is None
    assert record["verdict"]["status"] == "error" and FAULT_REASONS[fault] in record["verdict"]["error"]

    started = time.monotonic()
    proc = cli("verify", str(run), "--grader-timeout", "3", check=False, timeout=240)
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (regraded,) = [orjson.loads(line) for line in (run / "verdicts.jsonl").read_bytes().splitlines()]
    assert regraded["source"] == "regrade" and regraded["trajectory_id"] == record["trajectory_id"]
    assert regraded["verdict"]["status"] == "error"
    assert FAULT_REASONS[fault] in regraded["verdict"]["error"]
    assert "1 grader errors" in proc.stdout and FAULT_REASONS[fault] in proc.stdout.replace("\n", " ")
    assert elapsed < 200, f"verify took {elapsed:.0f} s"


def test_regrade_library_times_out_another_verifier_version_that_hangs(tmp_path):
    from proofgym.eval import evaluate
    from proofgym.verify.regrade import RegradeError, regrade_run
    from tests.faulty_graders import make_env

    if "proofgym-test/FaultyOk-v0" not in gymnasium.registry:
        gymnasium.register("proofgym-test/FaultyOk-v0", entry_point=make_env, kwargs={"fault": "ok"})
    evaluate("proofgym-test/FaultyOk-v0", ReferencePolicy(), out=tmp_path)
    for verifier in ("inline", "process"):
        started = time.monotonic()
        report = regrade_run(tmp_path, verifier_version="hangs", verifier=verifier, grader_timeout_s=1.0)
        assert time.monotonic() - started < 60, verifier
        assert report.regraded == 1 and report.errors == 1, verifier
        assert "did not finish within the 1 s timeout" in report.records[0]["verdict"]["error"]
    assert regrade_run(tmp_path, verifier_version="1", verifier="process").new_mean == 1.0
    with pytest.raises(RegradeError, match="seconds > 0"):
        regrade_run(tmp_path, grader_timeout_s=0)


def test_library_evaluate_and_regrade_isolate_a_grader_that_kills_its_process_by_default(tmp_path):
    """evaluate() and regrade_run() grade through the CLI's backend by default: a grader's
    os._exit is an error verdict, not the end of this process (with threads here, as both did,
    it was), and evaluate() fails the run over its error budget as ``proofgym eval`` exits 3."""
    from proofgym.errors import ErrorBudgetExceeded
    from proofgym.eval import evaluate
    from proofgym.verify.regrade import regrade_run

    with pytest.raises(ErrorBudgetExceeded) as failed:
        evaluate("tests.faulty_graders:Faulty-v0", ReferencePolicy(), env_kwargs={"fault": "exit"},
                 out=tmp_path)
    (traj,) = failed.value.trajectories
    assert traj.status == "ok" and traj.verdict is not None and traj.verdict.status == "error"
    assert FAULT_REASONS["exit"] in (traj.verdict.error or "")
    assert failed.value.summary["error_rate"] == 1.0 and failed.value.exit_code == 3
    report = regrade_run(tmp_path)
    assert report.regraded == report.errors == 1
    assert FAULT_REASONS["exit"] in report.records[0]["verdict"]["error"]
