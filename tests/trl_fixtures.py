"""Module-level envs for the TRL tests (importable by name, as the grading processes and the
pickled adapter classes need)."""

from __future__ import annotations

import dataclasses
import importlib
from types import ModuleType

import pytest

from proofgym.core import Trace, Verdict
from proofgym.env import UniversalVerifiableEnv
from proofgym.envs.arith import ArithTask
from proofgym.envs.arith import make_env as make_arith_env
from proofgym.tasks import TaskSet
from tests.conftest import IN_CI

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


def require_module(name: str) -> ModuleType:
    """Import ``name`` (a package of the ``[trl]`` extra). Missing: a failure in CI, where
    ``.ci/run`` installs the extra, and a skip locally."""
    try:
        return importlib.import_module(name)
    except ImportError:
        message = f"{name!r} is not installed (pip install -e '.[trl]')"
        if IN_CI:
            pytest.fail(f"{message}; CI must install the [trl] extra in .ci/run")
        pytest.skip(message, allow_module_level=True)
