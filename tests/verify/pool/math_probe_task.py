"""A task module that uses the math check (as Arith does): the pool warms it up before a job."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from proofgym import Trace
from proofgym.verify import math_equivalent
from tests.verify.pool.warmup_probe_tasks import WarmProbe, warm_state


@dataclass(frozen=True)
class MathProbe(WarmProbe):
    def verify(self, trace: Trace, runtime: Any) -> float:
        state = warm_state()  # before this job's own check
        return state if math_equivalent("1/2", "0.5") else -1.0
