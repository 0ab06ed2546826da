"""Graders that hang, segfault or kill their process, for the grading-road tests.

Importable by the tests (``tests.faulty_graders``) and by a CLI subprocess with this checkout on
``PYTHONPATH`` (``tests.faulty_graders:Faulty-v0``; ``--env-arg fault=segfault`` picks the fault).
The tasks are module-level, so they pickle into the verifier pool's worker processes.
"""

from __future__ import annotations

import ctypes
import os
import time
from dataclasses import dataclass
from typing import Any

import gymnasium

from proofgym import (
    InProcessRuntime,
    Task,
    TaskSet,
    TaskSpec,
    Trace,
    TurnCompleteAction,
    UniversalVerifiableEnv,
)

#: What each fault does to the grader's process: nothing (``ok``), sleep "forever", a NULL read
#: (SIGSEGV), ``os._exit(1)``.
FAULTS = ("ok", "hang", "segfault", "exit")

#: Long enough that a grader which is not stopped makes any test time out.
HANG_S = 3600


@dataclass(frozen=True)
class FaultyTask(Task):
    """Say yes. The grader misbehaves as ``fault`` says before it scores."""

    fault: str = "ok"

    @property
    def id(self) -> str:
        return f"faulty-{self.fault}"

    def get_spec(self) -> TaskSpec:
        return TaskSpec("Say yes.")

    def verify(self, trace: Trace, runtime: Any) -> float:
        if self.fault == "hang":
            time.sleep(HANG_S)
        elif self.fault == "segfault":
            ctypes.string_at(0)
        elif self.fault == "exit":
            os._exit(1)
        return float(trace.final_message() == "yes")

    def verifiers(self) -> dict[str, Any]:
        """Another verifier version, for re-grading: one that hangs."""
        return {"hangs": _hangs}

    def reference_solution(self) -> list[TurnCompleteAction]:
        return [TurnCompleteAction("yes")]

    def controls(self) -> dict[str, list[TurnCompleteAction]]:
        return {"says_no": [TurnCompleteAction("no")]}


def _hangs(trace: Trace, runtime: Any) -> float:
    time.sleep(HANG_S)
    return 1.0


def make_env(fault: str = "hang") -> UniversalVerifiableEnv:
    if fault not in FAULTS:
        raise ValueError(f"unknown fault {fault!r}; use one of {FAULTS}")
    return UniversalVerifiableEnv(InProcessRuntime([]), max_turns=1,
                                  tasks=TaskSet([FaultyTask(fault)], name=f"faulty-{fault}"))


def make_every_fault_env() -> UniversalVerifiableEnv:
    """One task per fault (``faulty-ok``, ``faulty-hang``, ...)."""
    return UniversalVerifiableEnv(InProcessRuntime([]), max_turns=1,
                                  tasks=TaskSet([FaultyTask(f) for f in FAULTS], name="faulty"))


if "Faulty-v0" not in gymnasium.registry:
    gymnasium.register("Faulty-v0", entry_point=make_env)
