"""A curriculum sampler: keep training on the tasks the policy sometimes solves.

Group-relative methods (GRPO and kin) learn nothing from a task whose attempts all pass or all
fail: every advantage is zero. :class:`Curriculum` therefore samples, from the **train split
only**, the tasks whose recent pass rate is strictly between 0 and 1, explores tasks it has not
seen yet, and keeps a floor of probability for every level so no level is forgotten.

It is deterministic given its seed and the order of the verdicts it is told about; its state
(outcome windows, counters and the generator's state) saves to ``curriculum.json`` in a run
directory, atomically, and a resumed curriculum makes the same next choices. Each choice comes
with the reason it was made, for the caller to record on the trajectory.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from proofgym.core import ConfigError, Task
from proofgym.runtimes.private_dirs import write_atomic
from proofgym.tasks.taskset import TaskSet

CURRICULUM_FILE = "curriculum.json"
_VERSION = 1


@dataclass(frozen=True)
class Choice:
    """One sampled task and why: ``strategy`` is ``informative`` (recent pass rate in (0, 1)),
    ``explore`` (never graded yet), ``floor`` (the level's reserved share) or ``uniform`` (nothing
    informative or unseen is left); ``pass_rate`` is the task's recent rate (``None`` if unseen)."""

    task: Task
    step: int
    strategy: str
    level: str
    pass_rate: float | None
    seen: int

    def to_dict(self) -> dict[str, Any]:
        """The reason, ready for ``Trajectory.extra["curriculum"]``."""
        return {"step": self.step, "task_id": self.task.id, "strategy": self.strategy, "level": self.level,
                "pass_rate": self.pass_rate, "seen": self.seen}


def _level_of(key: str | None) -> Callable[[Task], str]:
    def level(task: Task) -> str:
        if key is None:
            return "all"
        return str((task.get_spec().metadata or {}).get(key, "none"))
    return level


class Curriculum:
    """Samples training tasks at the edge of the policy's ability.

    ``tasks`` is guarded: only its train split is ever sampled (``tasks.for_training()``).
    Per call of :meth:`next`: with probability ``floor`` times the number of levels, a level is
    drawn uniformly and a task within it (its informative or unseen tasks first); otherwise, with
    probability ``explore`` (or when no task is informative) an unseen task; otherwise an
    informative task. :meth:`update` records a verdict (pass = reward at or above ``threshold``)
    in the task's window of the last ``window`` outcomes. Both are thread-safe and never block on
    anything but a short lock, so they are safe to call from an event loop.
    """

    def __init__(self, tasks: TaskSet, *, seed: int = 0, window: int = 8, explore: float = 0.1,
                 floor: float = 0.02, level_key: str | None = "level", threshold: float = 1.0) -> None:
        if window < 1:
            raise ConfigError(f"curriculum window must be at least 1, got {window}")
        self.tasks = tasks if tasks.training else tasks.for_training()
        levels = _level_of(level_key)
        self._level = {t.id: levels(t) for t in self.tasks}
        self._levels = sorted(set(self._level.values()))
        if not 0 <= explore <= 1 or not 0 <= floor * len(self._levels) <= 1:
            raise ConfigError(f"explore must be in [0, 1] and floor x levels in [0, 1]; got "
                              f"explore={explore}, floor={floor} with {len(self._levels)} levels")
        self.seed, self.window, self.explore, self.floor = seed, window, explore, floor
        self.level_key, self.threshold = level_key, threshold
        self._rng = np.random.Generator(np.random.PCG64(seed))
        self._outcomes: dict[str, deque[bool]] = {}
        self._step = 0
        self._lock = threading.Lock()

    # ------------------------------------------------------------- sampling
    def _rate(self, task_id: str) -> float | None:
        window = self._outcomes.get(task_id)
        return sum(window) / len(window) if window else None

    def _pick(self, ids: list[str]) -> str:
        return ids[int(self._rng.integers(len(ids)))]

    def next(self) -> Choice:
        """The next task to train on, with the reason."""
        with self._lock:
            ids = self.tasks.ids
            informative = [i for i in ids if (r := self._rate(i)) is not None and 0 < r < 1]
            unseen = [i for i in ids if i not in self._outcomes]
            u = float(self._rng.random())
            if u < self.floor * len(self._levels):
                level = self._levels[int(self._rng.integers(len(self._levels)))]
                pool = [i for i in informative + unseen if self._level[i] == level] or \
                       [i for i in ids if self._level[i] == level]
                strategy, task_id = "floor", self._pick(pool)
            elif unseen and (not informative or float(self._rng.random()) < self.explore):
                strategy, task_id = "explore", self._pick(unseen)
            elif informative:
                strategy, task_id = "informative", self._pick(informative)
            else:
                strategy, task_id = "uniform", self._pick(ids)
            self._step += 1
            window = self._outcomes.get(task_id)
            return Choice(self.tasks.get(task_id), self._step, strategy, self._level[task_id],
                          self._rate(task_id), len(window) if window else 0)

    def update(self, task_id: str, reward: float | None) -> None:
        """Record a verdict. ``None`` (an unscored episode: a grader or harness error) is ignored:
        an infrastructure failure says nothing about the policy."""
        if reward is None:
            return
        with self._lock:
            if task_id not in self._level:
                raise ConfigError(f"curriculum: {task_id!r} is not a training task of {self.tasks.name!r}")
            self._outcomes.setdefault(task_id, deque(maxlen=self.window)).append(reward >= self.threshold)

    def pass_rates(self) -> dict[str, float]:
        """The recent pass rate of every task graded so far."""
        with self._lock:
            return {i: r for i in self._outcomes if (r := self._rate(i)) is not None}

    # ------------------------------------------------------------- state
    def state(self) -> dict[str, Any]:
        with self._lock:
            return {"version": _VERSION, "taskset": self.tasks.content_hash, "seed": self.seed,
                    "window": self.window, "explore": self.explore, "floor": self.floor,
                    "level_key": self.level_key, "threshold": self.threshold, "step": self._step,
                    "rng": self._rng.bit_generator.state,
                    "outcomes": {i: [int(x) for x in w] for i, w in self._outcomes.items()}}

    def save(self, run_dir: str | Path) -> Path:
        """Write the state to ``RUN_DIR/curriculum.json`` so that a crash leaves the old or the new
        file, never a torn one."""
        path = Path(run_dir) / CURRICULUM_FILE
        write_atomic(path, json.dumps(self.state(), sort_keys=True).encode())
        return path

    @classmethod
    def resume(cls, tasks: TaskSet, run_dir: str | Path) -> Curriculum:
        """The curriculum saved in ``run_dir``, over the same task set (checked by content hash)."""
        path = Path(run_dir) / CURRICULUM_FILE
        try:
            state = json.loads(path.read_text())
        except FileNotFoundError:
            raise ConfigError(f"no {CURRICULUM_FILE} in {run_dir}: nothing to resume; start a new "
                              "Curriculum instead") from None
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}: not valid JSON ({exc})") from None
        return cls.from_state(tasks, state)

    @classmethod
    def from_state(cls, tasks: TaskSet, state: Mapping[str, Any]) -> Curriculum:
        if state.get("version") != _VERSION:
            raise ConfigError(f"curriculum state version {state.get('version')!r} is not {_VERSION}")
        cur = cls(tasks, seed=state["seed"], window=state["window"], explore=state["explore"],
                  floor=state["floor"], level_key=state["level_key"], threshold=state["threshold"])
        if cur.tasks.content_hash != state["taskset"]:
            raise ConfigError(f"the saved curriculum was over training tasks {state['taskset']}, these are "
                              f"{cur.tasks.content_hash}: resume with the same task set and splits")
        cur._rng.bit_generator.state = state["rng"]
        cur._step = int(state["step"])
        cur._outcomes = {i: deque((bool(x) for x in w), maxlen=cur.window)
                         for i, w in state["outcomes"].items()}
        return cur
