"""Drawing a sample of a task set for a run, stratified so that every group is represented.

Why stratified: a task set is usually ordered by its source (a manifest groups a project's tasks
together), so the first ``n`` tasks of it are a handful of projects, and a uniform draw over a
set where some groups hold hundreds of tasks and others a few leaves the small ones out. A
stratified draw takes the groups in turn, each time one not yet drawn task of the group, so the
sample covers ``min(n, groups)`` groups and no group has more than one task over any other that
still had one to give.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from proofgym.core import ConfigError, Task


def stratified_sample(tasks: Sequence[Task], n: int, *, seed: int = 0) -> list[str]:
    """The ids of ``n`` distinct tasks of ``tasks``, drawn evenly across their groups
    (:attr:`Task.stratum`; a task without one is a group of its own kind, ``None``).

    Deterministic in ``(tasks, n, seed)``, whatever the order of ``tasks``: groups and the tasks
    within each are ordered by id, then shuffled by a generator seeded with ``seed``. Groups are
    taken round-robin in that shuffled order. ``n`` larger than the set is an error: a sample
    never repeats a task (``-G`` repeats attempts)."""
    if n < 1:
        raise ConfigError(f"a sample needs at least one task (got {n})")
    if n > len(tasks):
        raise ConfigError(f"cannot sample {n} tasks from {len(tasks)}; ask for at most {len(tasks)} "
                          "(or drop --sample to run every task)")
    rng = np.random.default_rng(seed)
    groups: dict[str, list[str]] = {}
    for task in tasks:
        groups.setdefault(str(task.stratum), []).append(task.id)
    queues = []
    for name in sorted(groups):
        ids = sorted(groups[name])
        queues.append([ids[i] for i in rng.permutation(len(ids))])
    queues = [queues[i] for i in rng.permutation(len(queues))]
    chosen: list[str] = []
    depth = 0
    while len(chosen) < n:
        for queue in queues:
            if depth < len(queue):
                chosen.append(queue[depth])
                if len(chosen) == n:
                    break
        depth += 1
    return chosen
