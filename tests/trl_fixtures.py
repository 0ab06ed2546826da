"""Module-level envs for the TRL tests (importable by name, as the grading processes and the
pickled adapter classes need)."""

from __future__ import annotations

import dataclasses

from proofgym.core import Trace, Verdict
from proofgym.env import UniversalVerifiableEnv
from proofgym.envs.arith import ArithTask
from proofgym.envs.arith import make_env as make_arith_env
from proofgym.tasks import TaskSet

#: A final message containing this makes :class:`CrashingArith`'s grader raise.
CRASH_MARKER = "GRADER-CRASH"


@dataclasses.dataclass(frozen=True)
class CrashingArith(ArithTask):
    """Arith's task and grader, except that the grader fails on :data:`CRASH_MARKER` (a real
    grader error: an exception inside ``verify``, in the grading process)."""

    verifier_version = "arith-crash-1"

    def verify(self, trace: Trace, runtime: object) -> Verdict:
        if CRASH_MARKER in (trace.final_message() or ""):
            raise RuntimeError("answer key unavailable (injected grader fault)")
        return super().verify(trace, runtime)


def crashing_arith_env(n_tasks: int = 8) -> UniversalVerifiableEnv:
    env = make_arith_env(n_tasks=n_tasks)
    assert env.tasks is not None
    env.tasks = TaskSet([CrashingArith(**{f.name: getattr(t, f.name) for f in dataclasses.fields(t)})
                         for t in env.tasks], name=f"crashing-{env.tasks.name}")
    return env
