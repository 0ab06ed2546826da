"""The rollout contract: canonical, hashed, and diffed by category against a parity file."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium
import pytest

from proofgym import InProcessRuntime, Limits, Task, TaskSet, TaskSpec, Trace, UniversalVerifiableEnv
from proofgym.eval import evaluate
from proofgym.eval.runs import TrainSplitWarning
from proofgym.record import ContractError, RolloutContract, diff_contracts, load_parity
from proofgym.rollout import ReferencePolicy
from proofgym.tools import Tool
from tests.conftest import REPO


def shout(text: str) -> str:
    """Upper-case a text.

    Args:
        text: The text.
    """
    return text.upper()


@dataclass(frozen=True)
class ShoutTask(Task):
    word: str
    verifier_version: str = "1"  # the grader's version; not part of what the task *is*

    @property
    def id(self) -> str:
        return f"shout-{self.word}"

    def get_spec(self) -> TaskSpec:
        return TaskSpec(f"Shout {self.word}.")

    def verify(self, trace: Trace, runtime: Any) -> float:
        return float(trace.final_message() == self.word.upper())


def make_shout_env(description: str = "Upper-case a text.", max_tool_calls: int = 4,
                   grader: int = 1) -> UniversalVerifiableEnv:
    runtime = InProcessRuntime([Tool(shout, description=description)])
    tasks = TaskSet([ShoutTask(w, str(grader)) for w in "ab"], name="shout")
    return UniversalVerifiableEnv(runtime, max_turns=1, tasks=tasks,
                                  limits=Limits(max_turns=1, max_tool_calls=max_tool_calls))


gymnasium.register("proofgym-test/Shout-v0", entry_point=make_shout_env)


class Scripted:
    """Says the word in capitals; a stand-in model with sampling settings."""

    def __init__(self, temperature: float = 0.0) -> None:
        self.temperature = temperature
        self._task: ShoutTask | None = None

    def start(self, task, observation, info, action_space) -> None:
        self._task = task

    def act(self, observation):
        from proofgym import TurnCompleteAction

        return TurnCompleteAction(self._task.word.upper())

    def describe(self) -> dict[str, Any]:
        return {"name": "scripted-model", "model": "shout-1", "temperature": self.temperature,
                "system_prompt": "You shout."}


def run(tmp: Path, name: str, temperature: float = 0.0, **kwargs: Any) -> Path:
    out = tmp / name
    evaluate("proofgym-test/Shout-v0", Scripted(temperature), out=out, env_kwargs=kwargs)
    return out


def contract_cli(*args: str) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run([sys.executable, "-m", "proofgym", "contract", *args], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)


def test_contract_holds_every_behaviour_changing_setting(tmp_path: Path) -> None:
    out = run(tmp_path, "a")
    data = json.loads(contract_cli("show", str(out)).stdout)
    assert data["contract_id"] == RolloutContract.load(out).id
    assert data["policy"]["model"] == "shout-1" and data["policy"]["system_prompt"] == "You shout."
    assert data["tools"]["shout"]["function"]["description"] == "Upper-case a text."
    assert data["limits"]["max_tool_calls"] == 4
    assert data["runtime"]["kind"] == "inprocess" and "timeout_s" in data["runtime"]
    assert data["tasks"]["name"] == "shout" and len(data["tasks"]["content_hash"]) == 16
    assert data["tasks"]["split_manifest"]
    assert data["verifiers"] == {f"{__name__}.ShoutTask": ["1"]}
    assert data["seeds"] == {"seed": 0, "episodes": None, "repeats": 1}
    assert data["proofgym"]["version"]


def test_contract_id_is_stable_and_canonical(tmp_path: Path) -> None:
    a, b = RolloutContract.load(run(tmp_path, "a")), RolloutContract.load(run(tmp_path, "b"))
    assert a.id == b.id and a.to_json() == b.to_json()
    reordered = RolloutContract({k: a.data[k] for k in reversed(list(a.data))})
    assert reordered.id == a.id
    edited = json.loads(a.to_json())
    edited["limits"]["max_tool_calls"] = 99
    with pytest.raises(ContractError, match="edited by hand"):
        RolloutContract.from_dict(edited)


@pytest.mark.parametrize(("kwargs", "category", "path"), [
    ({"description": "Make a text upper case."}, "tools", "tools.shout.function.description"),
    ({"max_tool_calls": 2}, "limits", "limits.max_tool_calls"),
    ({"grader": 2}, "verifiers", f"verifiers.{__name__}.ShoutTask"),
])
def test_diff_finds_the_change(tmp_path: Path, kwargs: dict, category: str, path: str) -> None:
    a, b = run(tmp_path, "a"), run(tmp_path, "b", **kwargs)
    proc = contract_cli("diff", str(a), str(b))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"[{category}]" in proc.stdout and path in proc.stdout
    assert "[policy]" not in proc.stdout and "[tasks]" not in proc.stdout
    found = diff_contracts(RolloutContract.load(a), RolloutContract.load(b))
    assert path in {d.path for d in found}


def test_declared_differences_pass_and_undeclared_fail(tmp_path: Path) -> None:
    a = run(tmp_path, "a")
    b = run(tmp_path, "b", temperature=0.7, max_tool_calls=2)
    parity = tmp_path / "parity.toml"
    parity.write_text('[[allow]]\npath = "policy.temperature"\n'
                      'reason = "production samples; evaluation is greedy"\n')
    proc = contract_cli("diff", str(a), str(b), "--parity", str(parity))
    assert proc.returncode == 1
    assert "production samples" in proc.stdout and "limits.max_tool_calls" in proc.stdout
    assert "2 not declared" in proc.stdout  # the limit, and the env argument that set it
    parity.write_text(parity.read_text() + '[[allow]]\npath = "limits.*"\nreason = "smaller prod budget"\n'
                      '[[allow]]\npath = "env.kwargs.max_tool_calls"\nreason = "sets that budget"\n')
    proc = contract_cli("diff", str(a), str(b), "--parity", str(parity))
    assert proc.returncode == 0, proc.stdout
    assert "0 not declared" in proc.stdout
    same = contract_cli("diff", str(a), str(run(tmp_path, "c")))
    assert same.returncode == 0 and "identical" in same.stdout


def test_parity_file_needs_reasons(tmp_path: Path) -> None:
    parity = tmp_path / "parity.toml"
    parity.write_text('[[allow]]\npath = "limits.max_tool_calls"\n')
    with pytest.raises(ContractError, match="no `reason`"):
        load_parity(parity)
    a = run(tmp_path, "a")
    proc = contract_cli("diff", str(a), str(a), "--parity", str(parity))
    assert proc.returncode == 2 and "reason" in proc.stdout
    missing = contract_cli("show", str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and "no rollout contract" in missing.stdout


def test_eval_on_train_split_warns_and_is_recorded(tmp_path: Path, cli) -> None:
    proc = cli("eval", "proofgym/Arith-v0", "--split", "train", "-n", "3", "--out", str(tmp_path))
    assert "WARNING" in proc.stdout and "TRAIN SPLIT" in proc.stdout
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["split"] == "train" and "TRAIN SPLIT" in summary["warnings"][0]
    assert RolloutContract.load(tmp_path)["tasks"]["split"] == "train"
    records = [json.loads(x) for x in (tmp_path / "trajectories.jsonl").read_text().splitlines()]
    assert {r["split"] for r in records} == {"train"}


def test_eval_on_heldout_split_only_runs_heldout_tasks(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no train-split warning here
        _, summary = evaluate("proofgym/Arith-v0", ReferencePolicy(), split="heldout", out=tmp_path)
    records = [json.loads(x) for x in (tmp_path / "trajectories.jsonl").read_text().splitlines()]
    assert records and {r["split"] for r in records} == {"heldout"}
    assert summary["warnings"] == [] and summary["episodes"] == len(records)
    with pytest.warns(TrainSplitWarning):
        evaluate("proofgym/Arith-v0", ReferencePolicy(), split="train", episodes=2)


@dataclass(frozen=True)
class JudgedTask(ShoutTask):
    judge_model: str = "judge-a"

    def rubric(self):
        from proofgym.verify import Component, LLMJudge, Rubric

        judge = LLMJudge(self.judge_model, base_url="http://127.0.0.1:9/v1")
        return Rubric([Component("shouted", lambda trace, rt: self.verify(trace, rt)),
                       judge.component(f"Shout {self.word}.", self.word.upper(), weight=0)], name="judged")


def test_a_rubric_judge_model_is_part_of_the_contract() -> None:
    def contract(model: str) -> RolloutContract:
        env = UniversalVerifiableEnv(InProcessRuntime([]), max_turns=1,
                                     tasks=TaskSet([JudgedTask("a", judge_model=model)], name="judged"))
        return RolloutContract.build(env, policy={"name": "p"})

    diffs = diff_contracts(contract("judge-a"), contract("judge-b"))
    paths = {d.path for d in diffs}
    assert "verifiers.rubrics[0].components.judge.grader.model" in paths
    assert all(d.category == "verifiers" for d in diffs)


def test_parity_rules_match_paths_prefixes_and_wildcards() -> None:
    from proofgym.record.contract import Difference, ParityRule

    def allowed(rule: str, path: str) -> bool:
        return ParityRule(rule, "why").matches(Difference(path.split(".")[0], path, 1, 2))

    assert allowed("limits.max_tool_calls", "limits.max_tool_calls")
    assert not allowed("limits.max_tool", "limits.max_tool_calls")
    assert allowed("policy.sampling", "policy.sampling.temperature")
    assert allowed("verifiers.rubrics", "verifiers.rubrics[0].components.judge.grader.model")
    assert allowed("verifiers.rubrics[0].components.*.model", "verifiers.rubrics[0].components.j.model")
    assert not allowed("verifiers.rubrics[1]", "verifiers.rubrics[0].version")
    assert allowed("tools.*.function.description", "tools.shout.function.description")
    assert not allowed("tools.*.function.description", "tools.shout.function.parameters.type")

