"""Real ``GRPOTrainer`` steps on proofgym environments (tiny CPU Qwen3, scripted generation).

The model's ``generate`` is replaced by a script (valid tool call, malformed tool call, final
answers, an answer whose grading fails); everything else is TRL's own: chat template, tool-call
parsing, the tool loop calling the adapter's methods, the reward function, advantages, loss and
the optimiser step. The rewards are checked against ``run_episode`` (the loop ``proofgym eval``
runs) playing the same actions.
"""

# ruff: noqa: E402 - the imports below need the [trl] extra, checked first

from __future__ import annotations

from tests.trl_fixtures import require_module

require_module("trl")

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import pytest

from proofgym.core import ToolCallAction, TurnCompleteAction
from proofgym.integrations.trl import EnvironmentReward, dataset, environment_factory
from proofgym.integrations.trl.environment import TRL_POLICY
from proofgym.rollout.episode import run_episode
from proofgym.rollout.policies import ScriptedPolicy
from tests.conftest import REPO, require_tool
from tests.training_runs import check_training_run
from tests.trl_fixtures import CRASH_MARKER, crashing_arith_env

if TYPE_CHECKING:
    from trl import GRPOConfig, GRPOTrainer

# torch, datasets, TRL's trainer and tests.trl_tiny (which loads transformers) are imported in
# the functions that use them: collecting this file, as every pytest-xdist worker does, would
# cost some 10 s of CPU per worker otherwise, spent even where none of these tests runs


class Recorder(EnvironmentReward):
    """The real reward function, keeping what each call saw and returned."""

    def __init__(self, **options: Any) -> None:
        super().__init__(backend="process", processes=2, **options)
        self.calls: list[dict[str, Any]] = []

    def __call__(self, *args: Any, **kwargs: Any) -> list[float | None]:
        rewards = super().__call__(*args, **kwargs)
        self.calls.append({
            "rewards": rewards, "verdicts": list(self.last_verdicts),
            "task_ids": [e.env.current_task.id for e in kwargs["environments"]],
            "steps": [e.trace_steps for e in kwargs["environments"]],
            "ids": [e.episode_id for e in kwargs["environments"]],
            "step": kwargs["trainer_state"].global_step,
        })
        return rewards


def check_recorded(run_dir: Path, calls: list[dict[str, Any]], *, task_rules: bool = True) -> None:
    """The GRPO run's directory holds every completion TRL scored, with the reward TRL received
    (``None``: a grader error, not trained on) and the trainer's step as its policy version; the
    rl export carries the same rewards and versions with TRL's completion tokens."""
    rewards = {i: r for call in calls for i, r in zip(call["ids"], call["rewards"], strict=True)}
    versions = {i: str(call["step"]) for call in calls for i in call["ids"]}
    assert len(rewards) == sum(len(c["ids"]) for c in calls)  # an id per completion
    assert len(set(versions.values())) == len(calls)  # one policy version per GRPO step
    records = check_training_run(run_dir, rewards, versions, dict.fromkeys(rewards, 0),
                                 TRL_POLICY["versioned_by"], task_rules=task_rules)
    scored = {i for i, r in rewards.items() if r is not None}
    assert {r["trajectory_id"] for r in records} == scored
    for record in records:
        assert record["reward"] == rewards[record["trajectory_id"]]
        assert record["policy_version"] == versions[record["trajectory_id"]] and record["age"] is None
        assert record["calls"][0]["completion_ids"]  # TRL's tokens of the completion


def grpo_config(tmp_path: Any, **overrides: Any) -> GRPOConfig:
    from trl import GRPOConfig

    options: dict[str, Any] = dict(
        output_dir=str(tmp_path / "out"), use_cpu=True, bf16=False, max_steps=2,
        per_device_train_batch_size=4, num_generations=4, max_completion_length=2048,
        learning_rate=1e-2, logging_steps=1, save_strategy="no", report_to=[], seed=0,
        max_tool_calling_iterations=4, dataloader_num_workers=0)
    options.update(overrides)
    return GRPOConfig(**options)


def train(factory: type, reward: EnvironmentReward, rows: list[dict[str, Any]],
          script: Any, tmp_path: Any, **config: Any) -> tuple[GRPOTrainer, list[dict[str, Any]], dict]:
    """Train 2 steps; returns the trainer, the batches TRL scored, and the parameters before."""
    from datasets import Dataset
    from trl import GRPOTrainer

    from tests.trl_tiny import ScriptedGenerate, rendered_prompts, tiny_model, tiny_tokenizer

    tokenizer = tiny_tokenizer(rendered_prompts(rows, factory))  # merges: shorter sequences
    model = tiny_model(tokenizer)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    trainer = GRPOTrainer(model=model, reward_funcs=[reward], args=grpo_config(tmp_path, **config),
                          train_dataset=Dataset.from_list(rows), processing_class=tokenizer,
                          environment_factory=factory)
    model.generate = ScriptedGenerate(tokenizer, script)
    scored: list[dict[str, Any]] = []
    original = trainer._generate_and_score_completions

    def capture(batch: Any) -> dict[str, Any]:
        out = original(batch)
        scored.append(out)
        return out

    trainer._generate_and_score_completions = capture
    trainer.train()
    return trainer, scored, before


def row_loss_grad(trainer: GRPOTrainer, batch: dict[str, Any], row: int) -> float:
    """The gradient norm of the GRPO loss of one completion of a scored batch."""
    import torch

    size = batch["completion_ids"].shape[0]
    sliced = {k: (v[row:row + 1] if isinstance(v, torch.Tensor) and v.dim() > 0 and v.shape[0] == size
                  else v) for k, v in batch.items()}
    params = [p for p in trainer.model.parameters() if p.requires_grad]
    trainer.model.zero_grad()
    loss = trainer.compute_loss(trainer.model, sliced)
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    return float(sum(g.abs().sum() for g in grads if g is not None))


# ----------------------------------------------------------------------------- Arith
def arith_actions(task: Any, row: int) -> list[Any]:
    """The actions behind each completion of a group (row = position in the group)."""
    if row == 0:
        return [ToolCallAction("calculator", {"expression": task.expression}),
                TurnCompleteAction(f"\\boxed{{{task.answer}}}")]
    if row == 1:  # malformed: a wrong argument name; the env answers with an error observation
        return [ToolCallAction("calculator", {"expr": task.expression}),
                TurnCompleteAction(f"\\boxed{{{task.wrong_answer}}}")]
    if row == 2:
        return [TurnCompleteAction(f"The answer is \\boxed{{{task.answer}}}")]
    return [TurnCompleteAction(f"{CRASH_MARKER} \\boxed{{{task.answer}}}")]


def arith_script(tasks: list[Any]) -> Any:
    from tests.trl_tiny import tool_call

    def script(text: str, row: int) -> str:
        task = next(t for t in tasks if t.question in text)
        done = text.count("<tool_response>")
        if done == 0:
            first = arith_actions(task, row % 4)[0]
        else:  # the follow-up of a tool call: which call it was shows in the tool response
            first = arith_actions(task, 1 if "invalid arguments" in text.rsplit("<tool_response>", 1)[1]
                                  else 0)[1]
        if isinstance(first, ToolCallAction):
            return tool_call(first.tool_name, first.tool_input)
        return first.message
    return script


@pytest.mark.slow
def test_grpo_trains_on_arith_with_tools_and_grader_errors_do_not_train(tmp_path):
    import torch

    # the environment's recording option: the GRPO run writes a run directory
    factory = environment_factory(crashing_arith_env, n_tasks=8, record_dir=str(tmp_path / "run"))
    env = crashing_arith_env(8)
    rows = dataset(env)
    tasks = [env.tasks.get(r["task_id"]) for r in rows]
    reward = Recorder()
    try:
        trainer, scored, before = train(factory, reward, rows, arith_script(tasks), tmp_path)
    finally:
        reward.close()

    assert len(reward.calls) == 2 and len(scored) == 2  # 2 steps, one reward call per batch
    for call in reward.calls:
        # the four completions of a group: tool call + right answer, malformed call + wrong
        # answer, right answer, and an answer whose grading crashed
        assert call["rewards"] == [1.0, 0.0, 1.0, None]
        assert [v.status for v in call["verdicts"]] == ["scored", "scored", "scored", "error"]
        assert "injected grader fault" in call["verdicts"][3].error
        valid, malformed = call["steps"][0][0], call["steps"][1][0]
        task = env.tasks.get(call["task_ids"][0])
        assert valid.action == ToolCallAction("calculator", {"expression": task.expression})
        assert valid.observation["type"] == "tool_output"  # the call ran in proofgym's runtime
        assert malformed.observation["type"] == "tool_error"
        assert "invalid arguments for 'calculator'" in malformed.observation["observation"]
        # the same actions through run_episode (proofgym eval's loop) give the same observations
        # and rewards
        for row, steps in enumerate(call["steps"]):
            traj = run_episode(env, ScriptedPolicy(arith_actions(task, row)), task_id=task.id)
            assert [dict(s.observation) for s in steps] == [dict(s.observation) for s in traj.steps]
            eval_reward = traj.verdict.reward if traj.verdict.scored else None
            assert call["rewards"][row] == eval_reward

    for batch in scored:
        advantages = batch["advantages"].tolist()
        assert advantages[3] == 0.0 and advantages[0] > 0 > advantages[1]
        assert row_loss_grad(trainer, batch, 3) == 0.0  # the grader error moves no parameter
        assert row_loss_grad(trainer, batch, 0) > 0.0  # while a scored completion does

    changed = [n for n, p in trainer.model.named_parameters() if not torch.equal(p.detach(), before[n])]
    assert changed, "no parameter changed in 2 GRPO steps"
    logged = {k for entry in trainer.state.log_history for k in entry}
    assert {"proofgym/correct", "proofgym/used_calculator", "proofgym/grader_error_rate",
            "proofgym/tool_error_rate"} <= logged
    assert any(re.fullmatch(r"rewards/proofgym/mean", k) for k in logged)
    check_recorded(tmp_path / "run", reward.calls, task_rules=False)  # a callable env: no id to rebuild


# ------------------------------------------------------------------------ CodeRepair
def _leftovers(marker: str) -> list[str]:
    """Processes and mounts that still mention ``marker`` (the trainer's private temp dir)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline:
            found.append(f"process {proc.name}: {cmdline[:200]}")
    mounts = Path("/proc/self/mountinfo").read_text()
    found += [f"mount: {line}" for line in mounts.splitlines() if marker in line]
    return found


@pytest.mark.slow
def test_grpo_trains_on_code_repair_in_sandboxes_and_leaves_nothing_behind(tmp_path):
    require_tool("bwrap")
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    out = tmp_path / "result.json"
    env = {**os.environ, "TMPDIR": str(private_tmp), "PYTHONPATH": str(REPO),
           "HF_HUB_OFFLINE": "1", "TRL_EXPERIMENTAL_SILENCE": "1"}
    proc = subprocess.run([sys.executable, "-m", "tests.trl_code_repair_run", str(out)], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = orjson.loads(out.read_bytes())

    assert len(result["calls"]) == 2
    group = result["group"]
    for call in result["calls"]:
        task_id = call["task_ids"][0]
        expected = [result["eval"][f"{task_id}/{which}"] for which in group]
        assert call["rewards"] == expected == [1.0, 0.0, 0.0, 1.0], call["errors"]
        fix, malformed = call["steps"][0][0], call["steps"][2][0]
        assert fix["action"]["tool_name"] == "str_replace"
        assert fix["obs"]["type"] == "tool_output" and "replaced 1 occurrence" in fix["obs"]["observation"]
        assert malformed["obs"]["type"] == "tool_error"
    assert result["changed"], "no parameter changed in 2 GRPO steps"
    assert result["pool_sizes"] == {"None": 4}  # one env (one sandbox) per rollout slot, reused
    check_recorded(tmp_path / "run", result["calls"])  # the reward's recording option

    # the trainer process has exited: none of its sandboxes, shells or mounts is left
    assert _leftovers(str(private_tmp)) == []
    # every sandbox scratch dir is gone (the minimal system, a cache kept on purpose across
    # processes, is in the user's state root, not here)
    assert [p.name for p in private_tmp.iterdir() if p.name.startswith("proofgym-sandbox-")] == []
