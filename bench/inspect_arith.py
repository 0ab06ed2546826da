"""The ``inspect_ai`` half of bench/peers.py: ``inspect eval bench/inspect_arith.py`` in its own
virtualenv, with the OpenAI provider pointed at the scripted server.

The tasks (prompt, answer) come from the JSON file named by ``PEERS_TASKS``; one ``generate()``
per sample (single turn, no tools) and a scorer that compares the last ``\\boxed{...}`` with the
answer as text (the scripted server writes the answer exactly).
"""

from __future__ import annotations

import json
import os
import re

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.scorer import CORRECT, INCORRECT, Score, Target, accuracy, scorer
from inspect_ai.solver import TaskState, generate

BOXED = re.compile(r"\\boxed\{([^{}]*)\}")


@scorer(metrics=[accuracy()])
def boxed_answer():  # type: ignore[no-untyped-def]
    async def score(state: TaskState, target: Target) -> Score:
        found = BOXED.findall(state.output.completion)
        ok = bool(found) and found[-1].strip() == target.text.strip()
        return Score(value=CORRECT if ok else INCORRECT, answer=found[-1] if found else None)

    return score


@task
def arith() -> Task:
    with open(os.environ["PEERS_TASKS"]) as f:
        rows = json.load(f)
    samples = [Sample(input=r["prompt"], target=r["answer"], id=r["id"]) for r in rows]
    return Task(dataset=MemoryDataset(samples), solver=generate(), scorer=boxed_answer())
