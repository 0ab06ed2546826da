"""The TRL reward function grades completions with the task's grader and never fakes a zero."""

from __future__ import annotations

import gymnasium
import pytest

from proofgym import InProcessRuntime, Task, TaskSet, TaskSpec, UniversalVerifiableEnv
from proofgym.integrations.trl import ProofgymReward, prompt_dataset


def test_prompt_dataset_and_rewards_on_arith():
    env = gymnasium.make("proofgym/Arith-v0", n_tasks=6).unwrapped
    rows = prompt_dataset(env, system_prompt="Be brief.")
    assert len(rows) == 6
    assert rows[0]["prompt"][0] == {"role": "system", "content": "Be brief."}
    assert rows[0]["prompt"][1]["content"] == env.tasks[0].get_spec().prompt
    reward = ProofgymReward(env)
    tasks = list(env.tasks)
    completions = [f"\\boxed{{{t.answer}}}" for t in tasks[:3]]
    completions += [f"\\boxed{{{t.wrong_answer}}}" for t in tasks[3:]]
    ids = [r["task_id"] for r in rows]
    assert reward(prompts=None, completions=completions, task_id=ids) == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    conversational = [[{"role": "assistant", "content": c}] for c in completions]
    assert reward(completions=conversational, task_id=ids)[:4] == [1.0, 1.0, 1.0, 0.0]
    assert reward.__name__ == "proofgym_reward"


class _Flaky(Task):
    def __init__(self, tid):
        self.tid = tid

    @property
    def id(self):
        return self.tid

    def get_spec(self):
        return TaskSpec("say ok")

    def verify(self, trace, runtime):
        if self.tid == "broken":
            raise RuntimeError("answer key missing")
        return float(trace.final_message() == "ok")


def test_grader_errors_are_none_not_zero_and_mismatched_columns_fail():
    env = UniversalVerifiableEnv(InProcessRuntime([]), max_turns=1,
                                 tasks=TaskSet([_Flaky("fine"), _Flaky("broken")]))
    seen = []
    reward = ProofgymReward(env, on_verdict=lambda tid, c, v: seen.append((tid, v.status)))
    assert reward(completions=["ok", "ok", "no"], task_id=["fine", "broken", "fine"]) == [1.0, None, 0.0]
    assert seen == [("fine", "scored"), ("broken", "error"), ("fine", "scored")]
    assert "answer key missing" in reward.last_verdicts[1].error
    with pytest.raises(ValueError, match="task_id"):
        reward(completions=["ok"], task_id=[])


def test_multi_turn_tasks_are_refused_with_a_clear_error():
    env = gymnasium.make("proofgym/Guess-v0", n_tasks=2).unwrapped
    with pytest.raises(ValueError, match="multi-turn"):
        ProofgymReward(env)(completions=["1"], task_id=[env.tasks.ids[0]])
