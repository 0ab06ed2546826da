"""Grader warm-ups, paid in a worker before job clocks start, and only for graders in use.

math-verify's first check costs most of a second (its import pulls in sympy, its parser builds
lazily): a worker whose tasks use the math check pays it once, before it says it is ready, instead
of inside a job's timeout. A pool whose tasks never check math (CodeRepair, a QA set graded by
exact match) pays nothing: about a third of a CPU second per pool start.

The process backend's forkserver imports :mod:`proofgym.verify.pool.forkserver_warmup` last
(after the task modules it knows of), which warms up if any loaded task module uses the math
check; a worker calls :func:`warm_up_for` again after importing a task module new to it. A Ray
actor, which learns its task modules only from its jobs, always warms up.

A task module "uses" the math check when one of its globals is
:func:`~proofgym.verify.graders.math_equivalent` or :class:`~proofgym.verify.graders.MathMatch`
(or a subclass), or when math-verify itself is loaded. A task that reaches the check another way
(a grader chosen by name, say) is graded the same; its first check in each worker pays the
warm-up inside the job (booked as grading time, well inside the default timeout).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterable


def _uses_math(module: object) -> bool:
    from proofgym.verify.graders import MathMatch, math_equivalent

    for value in list(getattr(module, "__dict__", {}).values()):
        if value is math_equivalent:
            return True
        if isinstance(value, type) and issubclass(value, MathMatch):
            return True
    return False


def needs_math(modules: Iterable[str]) -> bool:
    """Whether any of ``modules`` (those imported) uses the math check, or math-verify is loaded."""
    if "math_verify" in sys.modules:
        return True
    return any(_uses_math(sys.modules.get(name)) for name in modules)


_warm = False  # inherited by forked processes: a worker forked from a warm server is warm


def warm_up_for(modules: Iterable[str]) -> bool:
    """Warm the math check up in this process if ``modules`` need it; whether they did."""
    if not needs_math(modules):
        return False
    warm_up()
    return True


def warm_up() -> None:
    """Pay the math check's first-call cost in this process (forked checkers start warm); once."""
    global _warm
    if _warm:
        return
    from proofgym.verify.graders import MathCheckStarved, math_equivalent

    # the parser is built in this process before the check; a busy host starving the check itself
    # costs nothing here (the next check starts a fresh checker)
    with contextlib.suppress(MathCheckStarved):
        math_equivalent("1/2", "0.5")
    _warm = True


def loaded_task_modules() -> list[str]:
    """Every loaded module but those that define or re-export the math check."""
    return [name for name in list(sys.modules)
            if name not in ("proofgym", "proofgym.verify") and not name.startswith("proofgym.verify.")]
