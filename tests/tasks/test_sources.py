"""Task sets from Python iterables, JSONL files and Hugging Face datasets, with QATask."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proofgym import InProcessRuntime, UniversalVerifiableEnv
from proofgym.rollout import ControlPolicy, ReferencePolicy, run_episode
from proofgym.tasks import TaskRecordError, TaskSet
from proofgym.verify import QATask

RECORDS = [
    {"id": "capital-fr", "prompt": "What is the capital of France?", "answer": "Paris"},
    {"prompt": "What is 1/4 + 1/4?", "answer": "1/2", "grader": "math"},
    {"prompt": "Give a date in ISO format.", "answer": "2024-01-31",
     "grader": {"type": "regex", "pattern": r"\d{4}-\d{2}-\d{2}"}, "metadata": {"topic": "format"}},
    {"id": "pi", "prompt": "Pi to 3 decimals?", "answer": "3.142",
     "grader": {"type": "numeric", "abs_tol": 1e-3}},
]


def solve_all(tasks: TaskSet) -> dict[str, float | None]:
    env = UniversalVerifiableEnv(InProcessRuntime([]), max_turns=1, tasks=tasks)
    out = {}
    for task_id in tasks.ids:
        out[task_id] = run_episode(env, ReferencePolicy(), task_id=task_id, seed=0).reward
        for control in ("empty", "no_answer"):
            assert run_episode(env, ControlPolicy(control), task_id=task_id, seed=0).reward == 0.0
    return out


def test_from_iterable_of_records_and_tasks() -> None:
    ts = TaskSet.from_iterable(RECORDS, name="qa", task_factory=QATask.from_record)
    assert ts.ids[0] == "capital-fr" and ts.ids[3] == "pi"
    assert ts.ids[1].startswith("qa-") and len(ts.ids[1]) == len("qa-") + 12
    assert set(solve_all(ts).values()) == {1.0}
    again = TaskSet.from_iterable(list(ts), name="qa")  # Task objects pass through
    assert again.content_hash == ts.content_hash
    with pytest.raises(TaskRecordError, match="task_factory"):
        TaskSet.from_iterable(RECORDS, name="qa")


def test_from_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "qa.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in RECORDS) + "\n\n")
    ts = QATask.load_jsonl(path)
    assert ts.name == "qa" and len(ts) == 4
    assert ts.content_hash == TaskSet.from_iterable(RECORDS, name="qa", task_factory=QATask.from_record
                                                    ).content_hash
    assert ts.get("pi").verifier_version == "qa-1/numeric-1"
    assert set(solve_all(ts).values()) == {1.0}


@pytest.mark.parametrize(("line", "message"), [
    ('{"prompt": "x"', "line 2: not valid JSON"),
    ('["a list"]', "line 2: expected a JSON object"),
    ('{"prompt": "x"}', "line 2: cannot build a task: .*lacks \\['answer'\\]"),
    ('{"prompt": "x", "answer": "y", "grader": "fuzzy"}', "line 2: .*unknown grader 'fuzzy'"),
    ('{"prompt": "x", "answer": "y", "extra": 1}', "line 2: .*unknown fields \\['extra'\\]"),
])
def test_bad_jsonl_lines_name_the_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(RECORDS[0]) + "\n" + line + "\n")
    with pytest.raises(TaskRecordError, match=message):
        QATask.load_jsonl(path)


def test_duplicate_ids_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="duplicate task id 'capital-fr'"):
        TaskSet.from_iterable([RECORDS[0], RECORDS[0]], task_factory=QATask.from_record)


def test_ids_and_hashes_are_stable_across_loads(tmp_path: Path) -> None:
    a = TaskSet.from_iterable(RECORDS, name="qa", task_factory=QATask.from_record)
    b = TaskSet.from_iterable([dict(r) for r in RECORDS], name="qa", task_factory=QATask.from_record)
    assert a.ids == b.ids and [t.content_hash for t in a] == [t.content_hash for t in b]
    changed = [dict(RECORDS[0], answer="Lyon"), *RECORDS[1:]]
    c = TaskSet.from_iterable(changed, name="qa", task_factory=QATask.from_record)
    assert c[0].content_hash != a[0].content_hash and c.content_hash != a.content_hash


def test_from_hf_dataset_built_locally() -> None:
    import datasets  # the `datasets` extra (in the test extra: a missing one fails, never skips)
    ds = datasets.Dataset.from_list([
        {"question": "What is 6 * 7?", "solution": "42", "uid": "mul-1"},
        {"question": "What is 2 ** 10?", "solution": "1024", "uid": "pow-1"},
    ])
    ts = QATask.from_dataset(ds, name="local-math",
                             fields={"question": "prompt", "solution": "answer", "uid": "id"})
    assert ts.ids == ["mul-1", "pow-1"] and ts.name == "local-math"
    assert ts.get("mul-1").prompt == "What is 6 * 7?"
    assert set(solve_all(ts).values()) == {1.0}
    bad = datasets.Dataset.from_list([{"question": "q"}])
    with pytest.raises(TaskRecordError, match="row 0: cannot build a task"):
        QATask.from_dataset(bad, fields={"question": "prompt"})


def test_from_hf_dataset_saved_to_disk(tmp_path: Path) -> None:
    import datasets

    ds = datasets.Dataset.from_list([{"prompt": "Capital of Italy?", "answer": "Rome", "id": "it"}])
    ds.save_to_disk(str(tmp_path / "capitals"))
    ts = QATask.from_dataset(tmp_path / "capitals")
    assert ts.name == "capitals" and ts.ids == ["it"] and solve_all(ts) == {"it": 1.0}
    with pytest.raises(TaskRecordError, match="pick one split"):
        QATask.from_dataset(datasets.DatasetDict({"test": ds}))
    with pytest.raises(FileNotFoundError, match="save_to_disk"):
        QATask.from_dataset(tmp_path / "missing")



def test_from_jsonl_gz(tmp_path: Path) -> None:
    import gzip

    path = tmp_path / "qa.jsonl.gz"
    with gzip.open(path, "wt") as f:
        f.write("\n".join(json.dumps(r) for r in RECORDS) + "\n")
    ts = TaskSet.from_jsonl(path, QATask.from_record)
    assert ts.name == "qa" and len(ts) == 4
    assert ts.content_hash == QATask.load_jsonl(_plain_copy(tmp_path)).content_hash
    assert set(solve_all(ts).values()) == {1.0}
    with gzip.open(tmp_path / "bad.jsonl.gz", "wt") as f:
        f.write(json.dumps(RECORDS[0]) + "\n{broken\n")
    with pytest.raises(TaskRecordError, match=r"bad\.jsonl\.gz: line 2: not valid JSON"):
        TaskSet.from_jsonl(tmp_path / "bad.jsonl.gz", QATask.from_record)
    (tmp_path / "fake.jsonl.gz").write_text("not gzip\n")
    with pytest.raises(TaskRecordError, match="cannot read it as gzip"):
        TaskSet.from_jsonl(tmp_path / "fake.jsonl.gz", QATask.from_record)


def _plain_copy(tmp_path: Path) -> Path:
    path = tmp_path / "plain" / "qa.jsonl"
    path.parent.mkdir()
    path.write_text("\n".join(json.dumps(r) for r in RECORDS) + "\n")
    return path


def test_a_missing_datasets_package_is_a_one_line_error(tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.conftest import REPO

    # a real interpreter in which `import datasets` fails, as without the extra
    code = ("import sys; sys.modules['datasets'] = None\n"
            "from proofgym.tasks import MissingExtraError\n"
            "from proofgym.verify import QATask\n"
            "try:\n    QATask.from_dataset(sys.argv[1])\n"
            "except MissingExtraError as exc:\n    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True,
                         env={"PYTHONPATH": str(REPO)}, check=True).stdout
    assert out.count("\n") == 1 and "pip install datasets" in out
