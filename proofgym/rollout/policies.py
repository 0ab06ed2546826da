"""Policies: what chooses the next action. ``reference``, ``random`` and ``scripted`` here; the
OpenAI-compatible model policy lives beside them."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol, runtime_checkable

import numpy as np
from gymnasium import spaces

from proofgym.core import ActionScript, AgentAction, ConfigError, Task, TurnCompleteAction
from proofgym.core.errors import EpisodeStateError


@runtime_checkable
class Policy(Protocol):
    """Chooses actions for one episode at a time.

    ``start`` is called after every ``reset`` with the task (policies that replay a task's own
    solution need it; model policies must only use the observation) and the env's action space.
    ``describe`` is recorded on every trajectory: name and version identify the policy exactly.
    """

    def start(self, task: Task, observation: Mapping[str, Any], info: Mapping[str, Any],
              action_space: spaces.Space) -> None: ...

    def act(self, observation: Mapping[str, Any]) -> AgentAction: ...

    def describe(self) -> dict[str, Any]: ...


class ScriptRunner:
    """Drives an :data:`ActionScript`: a fixed sequence, or a generator fed each observation.

    When the script runs out before the episode ends, the runner ends the turn with an empty
    message, so a too-short script ends in the task's own way (or in truncation), never a hang.
    """

    def __init__(self, script: ActionScript) -> None:
        self._gen = script if hasattr(script, "send") else None
        self._iter: Iterator[AgentAction] | None = None if self._gen else iter(script)
        self._started = False
        self.exhausted = False

    def next(self, observation: Mapping[str, Any]) -> AgentAction:
        try:
            if self._gen is not None:
                if not self._started:
                    self._started = True
                    return next(self._gen)  # type: ignore[call-overload]
                return self._gen.send(observation)
            assert self._iter is not None
            return next(self._iter)
        except StopIteration:
            self.exhausted = True
            return TurnCompleteAction("")


class ScriptedPolicy:
    """Plays a fixed script: the same actions for every episode, or ``script_for(task)``."""

    def __init__(self, actions: ActionScript | Callable[[Task], ActionScript], *,
                 name: str = "scripted", version: str = "1") -> None:
        self._script_for = actions if callable(actions) else None
        self._actions = None if callable(actions) else list(actions)  # type: ignore[arg-type]
        self.name, self.version = name, version
        self._runner: ScriptRunner | None = None

    def start(self, task: Task, observation: Mapping[str, Any], info: Mapping[str, Any],
              action_space: spaces.Space) -> None:
        script = self._script_for(task) if self._script_for else self._actions
        self._runner = ScriptRunner(script)  # type: ignore[arg-type]

    def act(self, observation: Mapping[str, Any]) -> AgentAction:
        if self._runner is None:
            raise EpisodeStateError("ScriptedPolicy.act before start()")
        return self._runner.next(observation)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version}


class ReferencePolicy(ScriptedPolicy):
    """Replays each task's reference solution (offline; proves the task is solvable)."""

    def __init__(self) -> None:
        super().__init__(self._reference, name="reference", version="1")

    @staticmethod
    def _reference(task: Task) -> ActionScript:
        script = task.reference_solution()
        if script is None:
            raise ConfigError(f"task {task.id!r} has no reference solution; the reference policy "
                              "needs Task.reference_solution()")
        return script


class ControlPolicy(ScriptedPolicy):
    """Replays the named negative control of each task (``Task.controls()[name]``)."""

    def __init__(self, control: str) -> None:
        super().__init__(self._control, name=f"control:{control}", version="1")
        self.control = control

    def _control(self, task: Task) -> ActionScript:
        controls = task.controls()
        if self.control not in controls:
            raise ConfigError(f"task {task.id!r} has no control {self.control!r}; "
                              f"it has: {', '.join(controls) or 'none'}")
        return controls[self.control]


class RandomPolicy:
    """Samples the env's action space: a fuzzer of valid and malformed calls.

    Seeded as Gymnasium seeds: each episode's randomness comes from ``(seed, episode seed)``
    alone, so episodes are reproducible one by one, whichever slot or copy plays them, and
    different episodes play different sequences. Without an episode seed, each episode draws a
    fresh one from the policy's own generator (seeded by ``seed``).
    """

    def __init__(self, seed: int | None = None) -> None:
        self.seed = seed
        self._rng = np.random.default_rng(seed)
        self._space: spaces.Space | None = None

    def start(self, task: Task, observation: Mapping[str, Any], info: Mapping[str, Any],
              action_space: spaces.Space, *, seed: int | None = None) -> None:
        episode = int(self._rng.integers(2**63)) if seed is None else seed
        entropy = [episode] if self.seed is None else [self.seed, episode]
        # A private copy: the env's space (shared by a slot's episodes) is never re-seeded.
        self._space = copy.deepcopy(action_space)
        self._space.seed(int(np.random.SeedSequence(entropy).generate_state(1, np.uint64)[0] >> 1))

    def act(self, observation: Mapping[str, Any]) -> AgentAction:
        if self._space is None:
            raise EpisodeStateError("RandomPolicy.act before start()")
        return self._space.sample()

    def describe(self) -> dict[str, Any]:
        return {"name": "random", "version": "2", "seed": self.seed}


def make_policy(spec: str, *, seed: int | None = None, **options: Any) -> Any:
    """A policy from its CLI name: ``reference``, ``random``, ``control:NAME`` or
    ``openai:MODEL`` (``options`` go to :class:`~proofgym.rollout.openai_policy.OpenAIPolicy`:
    ``base_url``, ``api_key``, ``system_prompt``, ``sampling``, ``version``, ...)."""
    if spec == "reference":
        return ReferencePolicy()
    if spec == "random":
        return RandomPolicy(seed)
    if spec.startswith("control:"):
        return ControlPolicy(spec.split(":", 1)[1])
    if spec.startswith("openai:") and spec.split(":", 1)[1]:
        from proofgym.rollout.openai_policy import OpenAIPolicy  # the openai client loads only when used

        return OpenAIPolicy(spec.split(":", 1)[1], **options)
    raise ConfigError(f"unknown policy {spec!r}; use 'reference', 'random', 'control:NAME' or "
                      "'openai:MODEL'")
