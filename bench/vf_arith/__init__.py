"""The ``verifiers`` 0.4 half of bench/peers.py: a v1 Taskset plugin with the same Arith tasks.

``vf-eval vf_arith --env.agent.harness.id null ...`` in the verifiers venv, with this directory's
parent on ``PYTHONPATH`` (a taskset is any importable module exporting its ``Taskset`` subclass
through ``__all__``). The tasks (prompt, answer) come from the JSON file named by
``PEERS_TASKS``; the reward compares the last ``\\boxed{...}`` with the answer as text, as the
inspect_ai row does (the scripted server writes the answer exactly).
"""

from __future__ import annotations

import json
import os
import re

import verifiers.v1 as vf
from verifiers.v1.types import content_text

BOXED = re.compile(r"\\boxed\{([^{}]*)\}")


class ArithData(vf.TaskData):
    answer: str = ""


class ArithTask(vf.Task[ArithData]):
    @vf.reward(weight=1.0)
    async def boxed_answer(self, trace: vf.Trace) -> float:
        replies = [content_text(m.content) for m in trace.messages if m.role == "assistant"]
        found = BOXED.findall(replies[-1]) if replies else []
        return 1.0 if found and found[-1].strip() == self.data.answer.strip() else 0.0


class ArithConfig(vf.TasksetConfig):
    pass


class ArithTaskset(vf.Taskset[ArithTask, ArithConfig]):
    def load(self) -> list[ArithTask]:
        with open(os.environ["PEERS_TASKS"]) as f:
            rows = json.load(f)
        return [ArithTask(ArithData(id=r["id"], prompt=r["prompt"], answer=r["answer"]), self.config.task)
                for r in rows]


__all__ = ["ArithTaskset"]
