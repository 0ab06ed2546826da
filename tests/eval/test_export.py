"""Export round-trips: SFT records are valid OpenAI chat messages that match their trajectories;
preference pairs are a better and a worse attempt at the same task."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
from openai.types.chat import ChatCompletionMessageParam
from pydantic import TypeAdapter

from proofgym import ToolCallAction, TurnCompleteAction
from proofgym.eval import evaluate
from proofgym.eval.export import chat_messages
from proofgym.record.rundir import load_run
from proofgym.rollout import RandomPolicy, ScriptedPolicy

CHAT = TypeAdapter(list[ChatCompletionMessageParam])


class Alternating(ScriptedPolicy):
    """Right on odd-numbered episodes, the task's first negative control on the others: two
    consecutive attempts at a task differ."""

    def __init__(self) -> None:
        self.calls = 0
        super().__init__(self._script, name="alternating")

    def _script(self, task):
        self.calls += 1
        return task.reference_solution() if self.calls % 2 else next(iter(task.controls().values()))


def _run(tmp_path: Path, env_id: str, policy, name: str, **kw) -> Path:
    out = tmp_path / name
    evaluate(env_id, policy, out=out, **kw)
    return out


def _with_broken_records(run: Path) -> list[str]:
    """Append a grader-error and an episode-error copy of a good record; returns their ids."""
    lines = (run / "trajectories.jsonl").read_bytes().splitlines()
    good = orjson.loads(lines[0])
    grader_error = {**good, "trajectory_id": "broken-grader", "extra": {"attempt": 90},
                    "verdict": {**good["verdict"], "status": "error", "error": "grader crashed"}}
    episode_error = {**good, "trajectory_id": "broken-episode", "extra": {"attempt": 91},
                     "status": "error", "error": "policy server down",
                     "verdict": {"reward": 0.0, "components": {}, "metrics": {}, "status": "unscored",
                                 "error": "episode failed", "grader": None}}
    with (run / "trajectories.jsonl").open("ab") as f:
        f.write(orjson.dumps(grader_error) + b"\n" + orjson.dumps(episode_error) + b"\n")
    return ["broken-grader", "broken-episode"]


def _actions_from(messages: list[dict]) -> tuple[list, list[str]]:
    """Rebuild the agent's actions and what it saw from exported messages."""
    actions, seen = [], []
    for m in messages[1:]:
        if m["role"] == "assistant" and m.get("tool_calls"):
            (call,) = m["tool_calls"]
            function = call["function"]
            actions.append(ToolCallAction(function["name"], json.loads(function["arguments"])))
        elif m["role"] == "assistant":
            actions.append(TurnCompleteAction(m["content"]))
        else:
            seen.append(m["content"])
    return actions, seen


@pytest.mark.parametrize("env_id", ["proofgym/Arith-v0", "proofgym/Guess-v0"])
def test_sft_records_are_chat_messages_that_match_their_trajectories(cli, tmp_path, env_id):
    run = _run(tmp_path, env_id, Alternating(), "run", episodes=3, repeats=2)
    broken = _with_broken_records(run)
    out = tmp_path / "sft.jsonl"
    # these runs span every split; held-out handling has its own test below
    proc = cli("export", str(run), "--format", "sft", "--include-heldout", "--out", str(out))
    assert "wrote 3 records from 8 trajectories" in proc.stdout
    assert "1 with an episode error" in proc.stdout and "1 with verdict error" in proc.stdout
    by_id = {t.trajectory_id: t for t in load_run(run).trajectories}
    records = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert len(records) == 3
    for record in records:
        CHAT.validate_python(record["messages"])  # real OpenAI message types, strictly shaped
        assert record["trajectory_id"] not in broken
        traj = by_id[record["trajectory_id"]]
        assert traj.reward == record["reward"] == 1.0 and record["task_id"] == traj.task_id
        assert "contract_id" in record and record["tools"] == traj.tools
        assert record["messages"][0] == {"role": "user", "content": traj.prompt}
        actions, seen = _actions_from(record["messages"])
        assert actions == [s.action for s in traj.steps]
        shown = [s.observation["observation"] for s in traj.steps
                 if s.observation["type"] in ("tool_output", "tool_error", "turn_transition")]
        assert seen == shown
        assert record["messages"][-1]["role"] == "assistant"


def test_sft_records_load_with_hf_datasets_as_chat_messages(cli, tmp_path):
    import datasets  # the [test] extra installs it: exported data must load where trainers read it
    run = _run(tmp_path, "proofgym/Arith-v0", RandomPolicy(seed=1), "random", episodes=12)
    ref = _run(tmp_path, "proofgym/Arith-v0", Alternating(), "ref", episodes=4)
    (tmp_path / "mixed").mkdir()
    with (tmp_path / "mixed" / "trajectories.jsonl").open("wb") as f:
        for source in (run, ref):  # one run holding both policies' episodes, under distinct ids
            for line in (source / "trajectories.jsonl").read_bytes().splitlines():
                record = orjson.loads(line)
                record["trajectory_id"] = f"{source.name}/{record['trajectory_id']}"
                f.write(orjson.dumps(record) + b"\n")
    out = tmp_path / "all.jsonl"
    cli("export", str(tmp_path / "mixed"), "--min-reward", "0", "--include-heldout", "--out", str(out))
    expected = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert len(expected) == 16
    assert any(m.get("tool_calls") for r in expected for m in r["messages"])
    loaded = datasets.load_dataset("json", data_files=str(out), split="train")
    assert loaded.num_rows == len(expected)
    for row, record in zip(loaded, expected, strict=True):
        assert row["trajectory_id"] == record["trajectory_id"]
        assert [m["role"] for m in row["messages"]] == [m["role"] for m in record["messages"]]
        assert [m["content"] for m in row["messages"]] == [m["content"] for m in record["messages"]]


def test_preference_pairs_pair_a_better_and_a_worse_attempt(cli, tmp_path):
    run = _run(tmp_path, "proofgym/Arith-v0", Alternating(), "run", episodes=4, repeats=2)
    _with_broken_records(run)
    out = tmp_path / "prefs.jsonl"
    proc = cli("export", str(run), "--format", "preferences", "--include-heldout", "--out", str(out))
    assert "wrote 4 preference pairs" in proc.stdout
    by_id = {t.trajectory_id: t for t in load_run(run).trajectories}
    pairs = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert len(pairs) == 4 and len({p["task_id"] for p in pairs}) == 4
    for pair in pairs:
        chosen, rejected = by_id[pair["chosen_trajectory_id"]], by_id[pair["rejected_trajectory_id"]]
        assert chosen.task_id == rejected.task_id == pair["task_id"]
        assert pair["chosen_reward"] == chosen.reward == 1.0
        assert pair["rejected_reward"] == rejected.reward == 0.0
        assert pair["prompt"] == [{"role": "user", "content": chosen.prompt}]
        assert pair["prompt"] + pair["chosen"] == chat_messages(chosen)
        assert pair["prompt"] + pair["rejected"] == chat_messages(rejected)
        CHAT.validate_python(pair["prompt"] + pair["chosen"])
        assert "broken" not in pair["rejected_trajectory_id"]
        assert "contract_id" in pair
    # a threshold nobody reaches gives no pairs; a single attempt per task gives none either
    cli("export", str(run), "--format", "preferences", "--min-reward", "2", "--out", str(out))
    assert out.read_bytes() == b""


def test_export_rejects_bad_input_clearly(cli, tmp_path):
    proc = cli("export", str(tmp_path), check=False)
    assert proc.returncode == 2 and "no trajectories.jsonl" in proc.stdout
    run = _run(tmp_path, "proofgym/Guess-v0", Alternating(), "run", episodes=1)
    proc = cli("export", str(run), "--format", "dpo", check=False)
    assert proc.returncode == 2 and "unknown format 'dpo'" in proc.stderr


def test_system_prompt_and_string_arguments_are_kept(tmp_path):
    malformed = ScriptedPolicy([ToolCallAction("calculator", '{"expression": 1')])
    run = _run(tmp_path, "proofgym/Arith-v0", malformed, "raw", episodes=1)
    traj = load_run(run).trajectories[0]
    messages = chat_messages(traj, system="Be brief.")
    assert messages[0] == {"role": "system", "content": "Be brief."}
    assert messages[2]["tool_calls"][0]["function"]["arguments"] == '{"expression": 1'  # verbatim
    assert messages[3]["role"] == "tool" and "not valid JSON" in messages[3]["content"]


def test_calls_from_one_model_reply_share_one_assistant_message(tmp_path):
    """The OpenAI policy records the 2nd..nth call of one reply with usage["from_previous_call"]."""
    run = _run(tmp_path, "proofgym/Arith-v0", Alternating(), "run", episodes=1)
    traj = load_run(run).trajectories[0]
    first = traj.steps[0]
    second = type(first)(ToolCallAction("calculator", {"expression": "1 + 1"}, "call_b"),
                         {"type": "tool_output", "observation": "2", "turn": 0}, {},
                         usage={"from_previous_call": True})
    first.usage = {"prompt_tokens": 10, "completion_tokens": 5}
    traj.steps.insert(1, second)
    messages = chat_messages(traj)
    CHAT.validate_python(messages)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool", "assistant"]
    assert [c["id"] for c in messages[1]["tool_calls"]] == ["call_0", "call_b"]
    assert [m["tool_call_id"] for m in messages[2:4]] == ["call_0", "call_b"]
    assert messages[3]["content"] == "2"


def test_heldout_episodes_are_not_exported_unless_asked(cli, tmp_path):
    run = _run(tmp_path, "proofgym/Arith-v0", Alternating(), "run", episodes=2, repeats=2)
    path = run / "trajectories.jsonl"
    records = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    for record in records:  # the run store stamps each record with its task's split
        record["split"] = "heldout" if record["task_id"].endswith("00000") else "train"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    out = tmp_path / "sft.jsonl"
    proc = cli("export", str(run), "--out", str(out))
    assert "wrote 1 records" in proc.stdout and "2 with a held-out task" in proc.stdout
    (kept,) = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert kept["split"] == "train"
    cli("export", str(run), "--include-heldout", "--out", str(out))
    splits = sorted(orjson.loads(line)["split"] for line in out.read_bytes().splitlines())
    assert splits == ["heldout", "train"]
