"""One session of the step tier: one client's env, its current episode, and the held-out guard.

A reset names its task (``task_id``: a held-out one only with ``allow_heldout``, which burns it),
or lets the server draw one among the tasks it may serve (:meth:`EnvSource.draw`: train tasks,
every task with ``allow_heldout``), so a plain seeded reset is never refused as held out.

A session owns its env (and so the env's runtime: a sandbox, its mounts and processes) from
open to :meth:`Session.close`; nothing else holds it. Calls on one session run one at a time
(its lock); a blocking runtime call runs on the server's thread pool, a cheap in-process one on
the event loop (as the orchestrator's local slots do).
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np

from proofgym.core import Verdict, describe_exception
from proofgym.env import UniversalVerifiableEnv, VerificationJob
from proofgym.make import make_env, takes_tasks
from proofgym.rollout.recorder import EpisodeRecorder
from proofgym.rollout.recording import Recording
from proofgym.serve.verdicts import VerdictStore
from proofgym.tasks import BURNED, SplitManifest, TaskSet
from proofgym.wire import Code, Reset, ServeError, Step, StepResult

log = logging.getLogger("proofgym.serve")

#: The contract's policy entry for served episodes: the policy is the client's (a trainer's),
#: versioned by what its resets say (``policy_version``, a training step).
SERVED_POLICY = {"name": "served", "versioned_by": "client reset: policy_version (trainer step)"}


@dataclass
class EnvSource:
    """How the server builds a session's env: ``env_id`` with ``env_kwargs``; the task set is
    built once (by the first env) and shared, as ``proofgym eval`` shares it between slots."""

    env_id: str
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    #: Serve one split only (``train``: a training server; sampling draws from it and any other
    #: task id is refused as held out); ``None``: every task, held-out ones behind the guard.
    split: str | None = None
    #: A frozen split manifest file (``proofgym splits freeze``) to serve the splits of; every
    #: burn is written back into it, so it outlives the server.
    splits: Path | None = None
    burns: list[dict[str, Any]] = field(default_factory=list)
    _shared: dict[str, Any] | None = None
    _tasks: Any = None
    template: UniversalVerifiableEnv | None = None
    _servable: list[str] | None = None
    _servable_set: frozenset[str] = frozenset()

    def build(self) -> UniversalVerifiableEnv:
        if self.template is None:
            template = make_env(self.env_id, **self.env_kwargs)
            if self.splits is not None and template.tasks is not None:
                template.tasks = template.tasks.with_splits(SplitManifest.load(self.splits))
            if self.split is not None and template.tasks is not None:
                template.tasks = template.tasks.split(self.split)
            self._tasks = template.tasks
            shares = takes_tasks(self.env_id) and "tasks" not in self.env_kwargs
            self._shared = {"tasks": template.tasks} if shares else {}
            # the template only describes the env (tools, limits, tasks): its runtime (a sandbox's
            # scratch space, say) is let go at once, so only sessions hold runtimes
            template.close()
            self.template = template
        env = make_env(self.env_id, **self.env_kwargs, **(self._shared or {}))
        if self._tasks is not None:
            env.tasks = self._tasks
        return env

    def draw(self, tasks: TaskSet, rng: np.random.Generator, allow: bool) -> str:
        """The task of a reset without a task id: among every task with ``allow`` (``allow_heldout``),
        else among the train tasks (the served split's tasks when it has none, held-out ones never).
        The env's own draw (:meth:`TaskSet.sample`) is kept when it is one of them, so a seeded
        reset gives the local env's task whenever the local env's task may be served."""
        first = tasks.sample(rng).id
        if allow:
            return first
        if self._servable is None:
            train = [t for t in tasks.ids if tasks.split_of(t) == "train"]
            self._servable = train or [t for t in tasks.ids if tasks.split_of(t) != "heldout"]
            self._servable_set = frozenset(self._servable)
        if not self._servable:
            raise ServeError(Code.HELD_OUT, "every task of this server is held out: a reset names one "
                             "(options={'task_id': ...}) with allow_heldout=true, which burns it")
        if first in self._servable_set:
            return first
        return self._servable[int(rng.integers(len(self._servable)))]

    def close(self) -> None:
        if self.template is not None:
            self.template.close()


class Session:
    """A client's env and episode (see the module docstring)."""

    def __init__(self, source: EnvSource, env: UniversalVerifiableEnv, verdicts: VerdictStore,
                 threads: cf.ThreadPoolExecutor, kind: str, recording: Recording | None = None) -> None:
        self.id = uuid.uuid4().hex
        self.kind = kind  # "ws" or "http"
        self.source = source
        self.env = env
        self.verdicts = verdicts
        self._threads = threads
        self._cheap = getattr(env.runtime, "cheap", False) is True
        self.lock = asyncio.Lock()
        self.last_active = time.monotonic()
        self.busy = False
        self.closed = False
        #: ids, policy versions and (with ``proofgym serve --record``) the run directory
        self.recording = recording if recording is not None else Recording(env_id=source.env_id,
                                                                           policy=SERVED_POLICY)
        self.episode_id: str | None = None
        self.recorder: EpisodeRecorder | None = None
        self.done = True
        self.inline_grading = True

    async def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        if self._cheap:
            return fn(*args)
        return await asyncio.get_running_loop().run_in_executor(self._threads, fn, *args)

    async def run(self, what: str, data: Any) -> dict[str, Any]:
        """``reset``, ``step`` or ``state``, one at a time per session."""
        async with self.lock:
            if self.closed:
                raise ServeError(Code.SESSION_ERROR, "the session is closed; open a new one")
            self.busy = True
            try:
                if what == "reset":
                    return await self._reset(Reset.from_dict(data))
                if what == "step":
                    return await self._step(data)
                return self.state()
            finally:
                self.busy = False
                self.last_active = time.monotonic()

    # ----------------------------------------------------------------- reset
    async def _reset(self, reset: Reset) -> dict[str, Any]:
        seed, task_id, allow, version = reset.seed, reset.task_id, reset.allow_heldout, reset.policy_version
        if task_id is not None:
            self._guard(task_id, allow, before=True)
        self.done = True
        obs, info = await self._call(lambda: self._start(seed, task_id, allow))
        task = self.env.current_task
        assert task is not None
        self._guard(task.id, allow, before=False)
        self.recorder = self.recording.begin(self.env, info, seed=seed, policy_version=version)
        self.episode_id = self.recorder.trajectory_id
        self.done = False
        self.inline_grading = reset.grading == "inline"
        return StepResult(obs, False, False, info, self._metadata()).to_dict()

    def _start(self, seed: int | None, task_id: str | None, allow: bool) -> tuple[Any, dict[str, Any]]:
        """The env's reset; without a task id, on a task drawn among those it may serve."""
        if task_id is None and self.env.tasks is not None:
            gymnasium.Env.reset(self.env, seed=seed)  # seeds np_random exactly as env.reset(seed=) does
            task_id = self.source.draw(self.env.tasks, self.env.np_random, allow)
            seed = None  # seeded above: the reset below must not reseed
        return self.env.reset(seed=seed, options={"task_id": task_id})

    def _guard(self, task_id: str, allow: bool, *, before: bool) -> None:
        if not before and not allow:
            self.done, self.episode_id = True, None  # a refused episode is no episode
        held_out_guard(self.env, self.source, task_id, allow, f"session {self.id[:12]}", burn=not before)

    # ------------------------------------------------------------------ step
    async def _step(self, data: Any) -> dict[str, Any]:
        step = Step.from_dict(data)
        if self.episode_id is None or self.done:
            raise ServeError(Code.EXECUTION_ERROR, "step before reset, or after the episode ended: "
                             "send a reset first", kind="episode_state")
        if step.tokens or step.cost:  # what the policy spent on this action (token/cost budgets)
            self.env.charge(tokens=step.tokens, cost=step.cost)
        obs, _reward, terminated, truncated, info = await self._call(self.env.step, step.action)
        recorder = self.recorder
        assert recorder is not None
        recorder.step(step.action, obs, terminated, truncated, info)
        verdict = None
        if terminated or truncated:
            self.done = True
            job = self.env.verification_job(recorder.trace())
            record = self.verdicts.submit(self.episode_id, job, recorder.trajectory.task_id)
            record.future.add_done_callback(lambda done: self._deliver(recorder, job, done))
            if self.inline_grading:
                verdict = await record.wait()
        return StepResult(obs, terminated, truncated, info, self._metadata(), verdict).to_dict()

    def _deliver(self, recorder: EpisodeRecorder, job: VerificationJob, graded: cf.Future[Verdict]) -> None:
        """The graded episode into the recording (a grading thread calls this when it lands)."""
        try:
            self.recording.deliver(recorder, graded.result(), artifact=job.artifact.to_dict(),
                                   verifier=self.verdicts.pool.describe())
        except Exception as exc:  # a future's callback has no caller to raise to: the log says it
            log.error("recording episode %s failed: %s", recorder.trajectory_id, describe_exception(exc))

    def state(self) -> dict[str, Any]:
        task = self.env.current_task
        steps = self.recorder.steps if self.recorder is not None else 0
        out = {"episode_id": self.episode_id, "step_count": steps, "session_id": self.id,
               "task_id": task.id if task is not None and self.episode_id else None, "done": self.done}
        if self.episode_id is not None:
            record = self.verdicts.get(self.episode_id)
            out["verdict_status"] = record.status if record is not None else None
        return out

    def _metadata(self) -> dict[str, Any]:
        return {"session_id": self.id, "episode_id": self.episode_id,
                "step": self.recorder.steps if self.recorder is not None else 0}

    async def close(self) -> None:
        """Close the env (its sandbox, mounts and processes go with it) once no call is running."""
        async with self.lock:
            if self.closed:
                return
            self.closed = True
            await self._call(self.env.close)


def held_out_guard(env: UniversalVerifiableEnv, source: EnvSource, task_id: str, allow: bool, who: str, *,
                   burn: bool) -> None:
    """The held-out guard: a held-out task is served only when the request says so
    (``allow_heldout``), and then (``burn``) it is burned: it leaves the held-out pool for good,
    and the server's burn log says who it was served to."""
    tasks = env.tasks
    if tasks is None or task_id not in tasks.manifest.tasks or tasks.split_of(task_id) != "heldout":
        return
    if not allow:
        raise ServeError(Code.HELD_OUT, f"task {task_id!r} is held out; a held-out task is served only "
                         "with allow_heldout=true, and serving it burns it (it leaves the held-out "
                         "pool: its numbers are no longer clean)")
    if burn:
        reason = f"served to {who} by proofgym serve"
        tasks.manifest.burn(task_id, reason)
        source.burns.append({"task_id": task_id, "reason": reason, "split": BURNED, "at": time.time()})
        log.warning("burned held-out task %s: %s", task_id, reason)
        if source.splits is not None:
            tasks.manifest.save(source.splits)
