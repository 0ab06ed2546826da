"""``QATask``: a generic question-and-answer task, loadable from JSONL files and datasets.

One record per task::

    {"id": "capital-fr", "prompt": "What is the capital of France?", "answer": "Paris",
     "grader": "normalized"}

``id`` is optional (default: ``qa-`` + a hash of prompt and answer, stable across processes);
``grader`` is a built-in grader name or ``{"type": ..., options}`` (default ``"normalized"``; for
``{"type": "regex", "pattern": ...}`` the ``answer`` is an example that the pattern accepts);
``metadata`` is optional. The answer is graded by a :class:`Rubric` with the grader as the rewarded
``correct`` component and whether an answer was given as a metric.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from proofgym.core import ActionScript, Task, TaskSpec, Trace, TurnCompleteAction, Verdict
from proofgym.core.errors import TaskRecordError
from proofgym.tasks import TaskSet
from proofgym.verify.graders.answers import HedgedAnswer, extract_final_answer
from proofgym.verify.graders.matchers import AnswerGrader, make_grader
from proofgym.verify.graders.rubric import Component, Rubric

_KNOWN = {"id", "prompt", "answer", "grader", "metadata"}


def _answered(trace: Trace, runtime: Any) -> float:
    message = trace.final_message()
    if not message:
        return 0.0
    try:
        return float(extract_final_answer(message) is not None)
    except HedgedAnswer:
        return 1.0


@dataclass(frozen=True, eq=False)  # identity equality: metadata is a dict, tasks stay hashable
class QATask(Task):
    """A prompt with one reference answer and a grader spec."""

    task_id: str
    prompt: str
    answer: str
    grader_spec: str | Mapping[str, Any] = "normalized"
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.grader()  # an unknown grader or a bad regex fails at load time, not at grading time

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> QATask:
        missing = [k for k in ("prompt", "answer") if k not in record]
        if missing:
            raise TaskRecordError(f"record lacks {missing} (a QA task needs 'prompt' and 'answer'; "
                                  f"it has {sorted(record)})")
        unknown = set(record) - _KNOWN
        if unknown:
            raise TaskRecordError(f"unknown fields {sorted(unknown)}; a QA record has {sorted(_KNOWN)} "
                                  "(put extra data under 'metadata')")
        prompt, answer = str(record["prompt"]), str(record["answer"])
        task_id = record.get("id")
        if task_id is None:
            task_id = "qa-" + hashlib.sha256(orjson.dumps([prompt, answer])).hexdigest()[:12]
        return cls(str(task_id), prompt, answer, record.get("grader", "normalized"),
                   dict(record.get("metadata") or {}))

    @classmethod
    def load_jsonl(cls, path: str | Path, *, name: str | None = None) -> TaskSet:
        return TaskSet.from_jsonl(path, cls.from_record, name=name)

    @classmethod
    def from_dataset(cls, dataset: Any, *, name: str | None = None,
                     fields: Mapping[str, str] | None = None) -> TaskSet:
        """From a ``datasets.Dataset``; ``fields`` maps its columns to ``prompt``/``answer``/
        ``id``/``grader`` (``{"question": "prompt"}``)."""
        return TaskSet.from_hf(dataset, cls.from_record, name=name, fields=fields)

    @property
    def id(self) -> str:
        return self.task_id

    @property
    def verifier_version(self) -> str:  # type: ignore[override]
        g = self.grader()
        return f"qa-1/{g.name}-{g.version}"

    def grader(self) -> AnswerGrader:
        return make_grader(self.grader_spec, self.answer)

    def rubric(self) -> Rubric:
        return Rubric([Component("correct", self.grader()), Component("answered", _answered, weight=0)],
                      name="qa", version=self.verifier_version)

    def get_spec(self) -> TaskSpec:
        return TaskSpec(self.prompt, metadata=dict(self.metadata))

    def verify(self, trace: Trace, runtime: Any) -> Verdict:
        return self.rubric().score(trace, runtime)

    def reference_solution(self) -> ActionScript:
        return [TurnCompleteAction(f"Answer: {self.answer}")]

    def controls(self) -> Mapping[str, ActionScript]:
        return {"empty": [TurnCompleteAction("")],
                "no_answer": [TurnCompleteAction("I do not know the answer to this question, sorry. "
                                                 "It is beyond what I can work out here.")]}

    def content(self) -> Mapping[str, Any]:
        return {"id": self.task_id, "prompt": self.prompt, "answer": self.answer,
                "grader": self.grader_spec, "metadata": dict(self.metadata)}
