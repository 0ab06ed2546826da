"""``proofgym/Arith-v0``: seeded multi-step arithmetic and algebra word problems.

Single turn: the agent's turn-ending message is its answer, graded with math-verify (``0.5``,
``1/2`` and ``\\frac{1}{2}`` are the same answer). An exact ``calculator`` tool is optional.
"""

from __future__ import annotations

from collections.abc import Sequence

from proofgym.core import Limits
from proofgym.core.errors import ConfigError
from proofgym.env import UniversalVerifiableEnv
from proofgym.envs.arith.calculator import calculator, evaluate
from proofgym.envs.arith.tasks import LEVELS, ArithTask, make_task
from proofgym.runtimes import InProcessRuntime
from proofgym.tasks import TaskSet


def arith_tasks(n: int = 400, *, seed: int = 0, levels: Sequence[int] = LEVELS) -> TaskSet:
    """``n`` problems cycling through ``levels``, generated from ``seed``."""
    bad = set(levels) - set(LEVELS)
    if bad or not levels:
        raise ConfigError(f"levels must be a non-empty subset of {LEVELS}, got {list(levels)}")
    return TaskSet.from_generator(
        lambda i: make_task(i, seed=seed, level=levels[i % len(levels)]), n, name=f"arith-s{seed}"
    )


def make_env(n_tasks: int = 400, seed: int = 0, levels: Sequence[int] = LEVELS,
             use_calculator: bool = True, max_tool_calls: int = 8,
             tasks: TaskSet | None = None) -> UniversalVerifiableEnv:
    """``tasks``: an already built task set of these settings (a run builds it once and shares
    it across its envs)."""
    runtime = InProcessRuntime([calculator] if use_calculator else [], timeout_s=5.0)
    tasks = tasks if tasks is not None else arith_tasks(n_tasks, seed=seed, levels=levels)
    return UniversalVerifiableEnv(runtime, tasks=tasks,
                                  limits=Limits(max_turns=1, max_tool_calls=max_tool_calls))


__all__ = ["LEVELS", "ArithTask", "arith_tasks", "calculator", "evaluate", "make_env", "make_task"]
