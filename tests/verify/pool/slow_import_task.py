"""A task module that takes a while to import (a grader with heavy dependencies), for the pool's
start-up tests: a worker imports it before the job's clock starts."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from proofgym import Task, TaskSpec, Trace

IMPORT_S = 1.2
time.sleep(IMPORT_S)


@dataclass(frozen=True)
class SlowImportTask(Task):
    name: str

    @property
    def id(self) -> str:
        return self.name

    def get_spec(self) -> TaskSpec:
        return TaskSpec(f"task {self.name}")

    def verify(self, trace: Trace, runtime: Any) -> float:
        return 1.0
