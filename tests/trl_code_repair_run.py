"""A trainer process for the CodeRepair GRPO test: ``python -m tests.trl_code_repair_run OUT.json``.

It trains 2 GRPO steps on CodeRepair-v0 through the adapter (one sandbox per pooled env
instance) and writes what it saw to ``OUT.json``, then exits without closing anything by hand:
the test checks that no sandbox process or mount outlives it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import orjson
import torch
from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer

from proofgym.core import ToolCallAction, TurnCompleteAction
from proofgym.envs.code_repair import make_env
from proofgym.integrations.trl import EnvironmentReward, dataset, environment_factory
from proofgym.rollout.episode import run_episode
from proofgym.rollout.policies import ScriptedPolicy
from tests.trl_tiny import ScriptedGenerate, rendered_prompts, tiny_model, tiny_tokenizer, tool_call

TASKS = ("ini-parser-continuation", "interval-merge-touching")


def actions(task: Any, script: int) -> list[Any]:
    """0: the reference fix, then done; 1: give up; 2: a malformed edit (missing arguments)."""
    if script == 0:
        edit = next(a for a in task.reference_solution()
                    if isinstance(a, ToolCallAction) and a.tool_name in ("str_replace", "write_file"))
        return [edit, TurnCompleteAction("Fixed the bug.")]
    if script == 1:
        return [TurnCompleteAction("I could not find the bug.")]
    return [ToolCallAction("str_replace", {"path": "README.md"}), TurnCompleteAction("Done.")]


GROUP = (0, 1, 2, 0)  # the scripts of the 4 completions of a group


def main(out: Path) -> None:
    env = make_env()
    tasks = {t: env.tasks.get(t) for t in TASKS}
    rows = [r for r in dataset(env) if r["task_id"] in TASKS]

    def script(text: str, row: int) -> str:
        task = next(t for t in tasks.values() if t.meta["issue"].rstrip() in text)
        done = text.count("<tool_response>")
        if done == 0:
            which = GROUP[row % 4]
        else:
            which = 2 if "invalid arguments" in text.rsplit("<tool_response>", 1)[1] else 0
        action = actions(task, which)[done]
        if isinstance(action, ToolCallAction):
            return tool_call(action.tool_name, action.tool_input)
        return action.message

    calls: list[dict[str, Any]] = []

    class Recorder(EnvironmentReward):
        def __call__(self, *args: Any, **kwargs: Any) -> list[float | None]:
            rewards = super().__call__(*args, **kwargs)
            calls.append({"rewards": rewards, "errors": [v.error for v in self.last_verdicts],
                          "ids": [e.episode_id for e in kwargs["environments"]],
                          "step": kwargs["trainer_state"].global_step,
                          "task_ids": [e.env.current_task.id for e in kwargs["environments"]],
                          "steps": [[s.to_dict() for s in e.trace_steps]
                                    for e in kwargs["environments"]]})
            return rewards

    reward = Recorder(processes=2, record_dir=out.parent / "run")  # the reward's recording option
    factory = environment_factory("proofgym/CodeRepair-v0")
    # merges learned from the prompts as the trainer renders them: a tenth of the byte length
    tokenizer = tiny_tokenizer(rendered_prompts(rows, factory))
    model = tiny_model(tokenizer)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    config = GRPOConfig(output_dir=str(out.parent / "grpo"), use_cpu=True, bf16=False, max_steps=2,
                        per_device_train_batch_size=4, num_generations=4,
                        max_completion_length=4096, learning_rate=1e-2, logging_steps=1,
                        save_strategy="no", report_to=[], seed=0, max_tool_calling_iterations=4)
    trainer = GRPOTrainer(model=model, reward_funcs=[reward], args=config,
                          train_dataset=Dataset.from_list(rows), processing_class=tokenizer,
                          environment_factory=factory)
    model.generate = ScriptedGenerate(tokenizer, script)
    trainer.train()
    changed = [n for n, p in model.named_parameters() if not torch.equal(p.detach(), before[n])]
    pool_sizes = {str(k): len(v) for k, v in trainer._environment_pool.items()}
    # proofgym eval's loop on the same actions, for the rewards to compare
    eval_rewards = {}
    for task_id in sorted({t for c in calls for t in c["task_ids"]}):
        for which in sorted(set(GROUP)):
            traj = run_episode(env, ScriptedPolicy(actions(tasks[task_id], which)), task_id=task_id)
            eval_rewards[f"{task_id}/{which}"] = traj.verdict.reward if traj.verdict.scored else None
    env.close()
    out.write_bytes(orjson.dumps({"calls": calls, "changed": changed, "eval": eval_rewards,
                                  "pool_sizes": pool_sizes, "group": GROUP}))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
