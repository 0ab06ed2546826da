"""``proofgym/CodeRepair-v0``: fix a bug in a small Python project from its issue text.

The agent works in a :class:`~proofgym.runtimes.sandbox.SandboxRuntime` over the task's
repository (bash and file tools, no network). Its changes are graded in a fresh sandbox with the
original tests restored and hidden tests added (SWE-bench FAIL_TO_PASS / PASS_TO_PASS).
"""

from __future__ import annotations

from pathlib import Path

from proofgym.core import Limits
from proofgym.core.errors import ConfigError
from proofgym.env import UniversalVerifiableEnv
from proofgym.envs.code_repair.task import CodeRepairTask
from proofgym.runtimes.sandbox import SandboxLimits, SandboxRuntime
from proofgym.tasks import TaskSet

DATA = Path(__file__).resolve().parent / "data"


def code_repair_tasks(data_dir: str | Path = DATA) -> TaskSet:
    """Every task directory (one with a ``task.json``) under ``data_dir``, by id."""
    roots = sorted(p.parent for p in Path(data_dir).glob("*/task.json"))
    if not roots:
        raise ConfigError(f"no code-repair tasks (directories with task.json) under {data_dir}")
    return TaskSet((CodeRepairTask.load(r) for r in roots), name=f"code-repair:{Path(data_dir).name}")


def make_env(data_dir: str | Path = DATA, max_tool_calls: int = 40,
             sandbox_limits: SandboxLimits | None = None) -> UniversalVerifiableEnv:
    runtime = SandboxRuntime(limits=sandbox_limits)
    return UniversalVerifiableEnv(runtime, max_turns=1, tasks=code_repair_tasks(data_dir),
                                  limits=Limits(max_turns=1, max_tool_calls=max_tool_calls))


__all__ = ["DATA", "CodeRepairTask", "code_repair_tasks", "make_env"]
