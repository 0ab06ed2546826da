"""An env whose setup and grader fail quoting hidden data: the server must not pass it on.

Registered as ``tests.serve.secret_env:Secret-v0`` (the server imports this module by the id).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium

from proofgym import InProcessRuntime, Task, TaskSet, TaskSpec, UniversalVerifiableEnv

SECRET = "SECRET-ANSWER-4242"


@dataclass(frozen=True)
class SecretTask(Task):
    name: str

    @property
    def id(self) -> str:
        return self.name

    def get_spec(self) -> TaskSpec:
        return TaskSpec(f"Task {self.name}: answer it.")

    def setup_runtime(self, runtime: Any) -> None:
        if self.name == "broken-setup":
            raise RuntimeError(f"cannot read /hidden/{self.name}/expected: {SECRET}")

    def verify(self, trace: Any, runtime: Any) -> float:
        if self.name == "broken-grader":
            raise ValueError(f"expected {SECRET}, got {trace.final_message()!r}")
        return 1.0 if trace.final_message() == "yes" else 0.0


def make_env() -> UniversalVerifiableEnv:
    tasks = [SecretTask(n) for n in ("broken-setup", "broken-grader", "fine")]
    every_task_trains = {"train": 1.0, "dev": 0.0, "heldout": 0.0}
    taskset = TaskSet(tasks, name="secret").with_splits(ratios=every_task_trains)
    return UniversalVerifiableEnv(InProcessRuntime([]), tasks=taskset)


gymnasium.register("Secret-v0", entry_point=make_env)
