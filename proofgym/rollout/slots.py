"""Where the orchestrator's env slots live: the seam between the episode loop and its backends.

A *slot* owns one env and plays one episode at a time. The loop only ever awaits a slot's
``reset``/``step``, so where the env really runs is the backend's business:

* ``local`` (:class:`LocalSlots`, the default): the env is in this process; its blocking calls
  run on a bounded thread pool (or directly on the event loop with ``runtime_threads=0``).
* ``ray`` (:mod:`proofgym.rollout.ray_slots`): the env lives in a Ray actor on some node of a
  cluster; its calls are awaited actor calls.

A slot whose backend loses it (its node died) raises :class:`SlotLostError` and sets ``lost``:
the orchestrator then re-runs the episode in a fresh slot, a bounded number of times.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from proofgym.core import AgentAction, Task, TaskSpec
from proofgym.core.errors import SlotLostError as SlotLostError
from proofgym.env import UniversalVerifiableEnv, VerificationJob
from proofgym.rollout.runtime_executor import RuntimeExecutor

EnvFactory = Callable[[], UniversalVerifiableEnv]


class EnvSlot(Protocol):
    """One env, wherever it runs. ``current_task``/``current_spec``/``action_space`` are valid
    after ``reset``."""

    current_task: Task | None
    current_spec: TaskSpec | None
    action_space: Any
    lost: bool
    #: Where the slot runs (recorded on its trajectories), e.g. ``{"backend": "ray", "node": ...}``.
    where: dict[str, Any]

    async def reset(self, seed: int | None, options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        ...

    async def step(self, action: AgentAction) -> tuple[Any, Any, bool, bool, dict[str, Any]]: ...

    def charge(self, tokens: int) -> None: ...

    async def verification_job(self, trace: list[Any]) -> VerificationJob: ...

    def close(self) -> None: ...


class SlotBackend(Protocol):
    """Makes slots for one run: ``start`` once, ``open`` per slot (and per replacement), then
    ``shutdown`` (after every slot was closed)."""

    name: str
    #: Times an episode whose slot was lost is re-run in a fresh slot before it is recorded as
    #: an infrastructure error (``status="error"``, re-run by ``--resume``).
    episode_retries: int

    def start(self, env_factory: EnvFactory, *, concurrency: int, runtime_threads: int) -> None: ...

    async def open(self) -> EnvSlot: ...

    def shutdown(self) -> None: ...

    def describe(self) -> dict[str, Any]: ...


class LocalSlot:
    """An env in this process; blocking calls go through ``calls`` (threads or the loop)."""

    lost = False

    def __init__(self, env: UniversalVerifiableEnv, calls: RuntimeExecutor | OnTheLoop, own: bool) -> None:
        self.env = env
        self._calls = calls
        self._own = own
        self.where: dict[str, Any] = {"backend": "local"}

    @property
    def current_task(self) -> Task | None:
        return self.env.current_task

    @property
    def current_spec(self) -> TaskSpec | None:
        return self.env.current_spec

    @property
    def action_space(self) -> Any:
        return self.env.action_space

    async def reset(self, seed: int | None, options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        return await self._calls.run(lambda: self.env.reset(seed=seed, options=options))

    async def step(self, action: AgentAction) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        return await self._calls.run(self.env.step, action)

    def charge(self, tokens: int) -> None:
        self.env.charge(tokens=tokens)

    async def verification_job(self, trace: list[Any]) -> VerificationJob:
        return self.env.verification_job(trace)  # freezes an artifact already taken: no I/O here

    def close(self) -> None:
        if self._own:
            self.env.close()


class LocalSlots:
    """The ``local`` backend: envs in this process, runtime calls on ``runtime_threads`` threads."""

    name = "local"
    episode_retries = 0  # a local slot is never lost: its failures are the episode's own

    def __init__(self, *, own_envs: bool = True) -> None:
        self._own = own_envs
        self._factory: EnvFactory | None = None
        self._calls: RuntimeExecutor | OnTheLoop = OnTheLoop()

    def start(self, env_factory: EnvFactory, *, concurrency: int, runtime_threads: int) -> None:
        self._factory = env_factory
        self._calls = RuntimeExecutor(runtime_threads) if runtime_threads else OnTheLoop()

    async def open(self) -> LocalSlot:
        assert self._factory is not None, "start() first"
        env = await self._calls.run(self._factory)
        # an env whose runtime is declared cheap (no tools, or all @tool(cheap=True)) runs on the
        # loop whatever runtime_threads says: a thread hand-off would cost more than the call
        calls = OnTheLoop() if getattr(env.runtime, "cheap", False) is True else self._calls
        return LocalSlot(env, calls, self._own)

    def shutdown(self) -> None:
        self._calls.shutdown()

    def describe(self) -> dict[str, Any]:
        return {"backend": "local"}


class OnTheLoop:
    """``runtime_threads=0``: runtime calls run directly on the event loop."""

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        return fn(*args)

    def shutdown(self) -> None:
        return None
