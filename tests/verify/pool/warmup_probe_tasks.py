"""Task modules for the pool's warm-up tests: each task scores whether the worker grading it had
math-verify warmed up before the job (1.0) or not loaded at all (0.0); anything between is 0.5."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from proofgym import Task, TaskSpec, Trace


def warm_state() -> float:
    answers = sys.modules.get("proofgym.verify.graders.answers")
    if answers is not None and answers._WARM:
        return 1.0
    return 0.0 if "math_verify" not in sys.modules else 0.5


@dataclass(frozen=True)
class WarmProbe(Task):
    name: str

    @property
    def id(self) -> str:
        return self.name

    def get_spec(self) -> TaskSpec:
        return TaskSpec(f"task {self.name}")

    def verify(self, trace: Trace, runtime: Any) -> float:
        return warm_state()
