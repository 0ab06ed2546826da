"""``stratified_sample`` and ``eval --sample``: a sample covers the task set's groups evenly."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from typer.testing import CliRunner

from proofgym.cli.main import app
from proofgym.core import ConfigError, Task, TaskSpec
from proofgym.envs.repo_repair import repo_repair_tasks
from proofgym.tasks.sampling import stratified_sample

pytestmark = pytest.mark.pure


class _Grouped(Task):
    def __init__(self, task_id: str, stratum: str) -> None:
        self._id, self.stratum = task_id, stratum

    @property
    def id(self) -> str:
        return self._id

    def get_spec(self) -> TaskSpec:
        return TaskSpec(self._id)

    def verify(self, trace, runtime) -> float:
        return 0.0


def _tasks(sizes: dict[str, int]) -> list[Task]:
    return [_Grouped(f"{group}-{i}", group) for group, size in sizes.items() for i in range(size)]


def test_a_sample_takes_the_groups_in_turn_and_never_repeats_a_task():
    tasks = _tasks({"big": 300, "mid": 20, "small": 2, "tiny": 1})
    chosen = stratified_sample(tasks, 10, seed=0)
    assert len(set(chosen)) == 10
    per_group = Counter(t.split("-")[0] for t in chosen)
    assert per_group == {"big": 4, "mid": 3, "small": 2, "tiny": 1}  # the small groups give what they have
    first = stratified_sample(tasks, 4, seed=0)
    assert Counter(t.split("-")[0] for t in first) == {"big": 1, "mid": 1, "small": 1, "tiny": 1}


def test_a_sample_depends_on_the_seed_only_not_on_the_order_of_the_tasks():
    tasks = _tasks({"a": 30, "b": 30, "c": 5})
    assert stratified_sample(tasks, 12, seed=7) == stratified_sample(tasks[::-1], 12, seed=7)
    assert stratified_sample(tasks, 12, seed=7) != stratified_sample(tasks, 12, seed=8)


def test_a_sample_larger_than_the_set_or_empty_is_refused_with_what_to_ask_for():
    tasks = _tasks({"a": 3})
    with pytest.raises(ConfigError, match="at most 3"):
        stratified_sample(tasks, 4)
    with pytest.raises(ConfigError, match="at least one"):
        stratified_sample(tasks, 0)


def test_a_repo_repair_sample_of_50_covers_at_least_20_projects():
    tasks = repo_repair_tasks()  # no sdist is fetched: a task's project is in its record
    chosen = stratified_sample(list(tasks), 50, seed=0)
    projects = {tasks.get(t).record.project for t in chosen}
    assert len(projects) >= min(20, len({t.record.project for t in tasks})), sorted(projects)


def test_eval_sample_runs_that_many_distinct_tasks_and_records_it(tmp_path):
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["eval", "proofgym/Arith-v0", "--sample", "6", "--seed", "3",
                                      "--out", str(out), "--verifier", "inline"])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    assert len(rows) == 6 and len({r["task_id"] for r in rows}) == 6
    assert json.loads((out / "contract.json").read_text())["seeds"]["sample"] == 6
    both = CliRunner().invoke(app, ["eval", "proofgym/Arith-v0", "--sample", "6", "-n", "3",
                                    "--out", str(tmp_path / "other")])
    assert both.exit_code == 2 and "give one" in both.output
