"""Grading: references score 1, known-wrong answers 0, equivalent forms 1, broken graders error."""

from __future__ import annotations

import math

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
