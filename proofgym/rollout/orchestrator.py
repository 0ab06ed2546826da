"""The async rollout orchestrator: many episodes in flight, grading off the generation path.

``concurrency`` slots each own one env (built once, reset for every episode). A slot takes the
next planned episode, plays it (policy calls are awaited; ``env.reset``/``env.step`` run on a
bounded thread pool, so the event loop never blocks on a runtime), then submits the episode's
:class:`~proofgym.env.VerificationJob` to the :class:`~proofgym.verify.pool.VerifierPool` and
starts its next episode at once. At most ``max_awaiting_grades`` episodes wait for grades: when
graders fall behind, slots wait (backpressure) instead of piling up memory.

This is the one episode loop: the synchronous path (``run_episode``, ``evaluate`` at ``-c 1``)
is this orchestrator at concurrency 1, so ids, error records and grading are the same at every
concurrency.

Every planned episode ends up delivered exactly once (to the sink, ``on_episode`` and the result
list), either graded or as an error record: a failure inside one episode (policy, server,
runtime, task) becomes that episode's ``status="error"`` trajectory with an ``unscored`` verdict,
and a grading call that raises becomes an ``error`` verdict. A failure of the *delivery* itself
(the sink cannot write, ``on_episode`` raises) stops the run: :meth:`Orchestrator.run` raises
:class:`RolloutError` and never returns with fewer episodes than planned.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from proofgym.core import (
    ConfigError,
    ProofgymError,
    Task,
    Verdict,
    describe_exception,
)
from proofgym.core.defaults import DEFAULTS
from proofgym.core.errors import RolloutError
from proofgym.core.errors import RunFailedError as RunFailedError
from proofgym.env import UniversalVerifiableEnv, VerificationJob
from proofgym.record import Trajectory
from proofgym.rollout.async_policy import AsyncPolicy, PolicySession, as_async_policy
from proofgym.rollout.ordered_writer import OrderedWriter
from proofgym.rollout.policies import Policy
from proofgym.rollout.progress import RunCounters, RunProgress
from proofgym.rollout.recorder import EpisodePlan, EpisodeRecorder, Sink
from proofgym.rollout.slots import EnvSlot, LocalSlots, SlotBackend, SlotLostError
from proofgym.verify.pool import VerifierPool

log = logging.getLogger(__name__)

#: Hard stop for a runaway loop (a policy that never ends its turn in an env without budgets).
MAX_STEPS = 10_000

#: The least default backpressure bound with a ``process`` pool: a fresh one takes seconds to boot
#: (its workers import the graders' code) while fast episodes finish by the dozen per second;
#: slots keep generating through that start-up instead of stalling at ``4 * concurrency``.
MIN_AWAITING_GRADES = 256


class _RunState:
    """What one :meth:`Orchestrator.run` shares between its slots and grading tasks."""

    def __init__(self, plans: list[EpisodePlan], sink: Sink | None,
                 on_episode: Callable[[Trajectory], None] | None, collect: bool, max_awaiting: int) -> None:
        self.plans = plans
        self.queue = iter(plans)
        self.writer = OrderedWriter(sink) if sink is not None else None
        self.on_episode = on_episode
        self.collect = collect
        self.results: list[Trajectory] = []
        self.grading: set[asyncio.Task[None]] = set()
        self.room = asyncio.Semaphore(max_awaiting)
        self.envs: list[EnvSlot] = []
        self.fatal: list[BaseException] = []  # delivery failures: the run stops and raises


class Orchestrator:
    """Runs a plan of episodes concurrently and grades them out of band.

    Args:
        env_factory: Builds one env; called once per slot (envs are reused, never rebuilt).
        policy: An :class:`AsyncPolicy`, or a sync :class:`Policy` (adapted, one copy per episode).
        concurrency: Episodes generated at once (default: ``DEFAULTS.concurrency``, as ``evaluate``
            and ``proofgym eval``).
        verifier: The pool grading finished episodes (default: a pool of the default backend,
            closed at the end of :meth:`run`; a pool you pass is yours to close).
        inline_verification: Grade inside the slot, before its next episode (the seed's behaviour,
            for comparison and debugging). Default: only for an ``inline`` pool.
        max_awaiting_grades: Bound on episodes waiting for grades (backpressure). Default
            ``4 * concurrency``; with a ``process`` pool at least :data:`MIN_AWAITING_GRADES`.
        runtime_threads: Threads for ``env.reset``/``env.step`` calls. Default ``concurrency``.
            ``0`` runs them on the event loop itself: only for in-process runtimes whose calls
            take microseconds (it saves a thread hand-off per step, which costs tens to hundreds
            of microseconds on a busy machine); a call that blocks would stall every episode.
            Whatever the setting, an env whose runtime reports ``cheap`` (an
            :class:`InProcessRuntime` whose tools are all declared ``@tool(cheap=True)``, or
            that has none) runs on the event loop.
        group_size: Attempts per task forming a group (GRPO-style); recorded as
            ``extra["group"] = {"id", "index", "size"}`` from the plan's ``attempt``.
        env_id: Recorded on every trajectory.
        progress: Show a rich progress bar (a :class:`RunProgress`, or ``True`` for a default one).
        grade_timeout_s: Per-job grading timeout (default: the pool's).
        contract_id: The run's contract: trajectory ids are ``CONTRACT/TASK#ATTEMPT`` (else
            ``TASK#ATTEMPT``), and the pool shares results only within one contract.
        own_envs: Close the envs the factory built when the run ends (``False`` when the
            factory hands out an env the caller keeps using).
        grade: Submit finished episodes for grading (``False``: trajectories carry no verdict).
        slots: Where env slots live (:mod:`proofgym.rollout.slots`): default ``local`` (this
            process); a :class:`~proofgym.rollout.ray_slots.RaySlots` puts them in Ray actors.
            A slot its backend loses mid-episode is replaced and the episode re-run, up to the
            backend's ``episode_retries`` times, then recorded as an error trajectory.
    """

    def __init__(self, env_factory: Callable[[], UniversalVerifiableEnv], policy: AsyncPolicy | Policy, *,
                 concurrency: int = DEFAULTS.concurrency, verifier: VerifierPool | None = None,
                 inline_verification: bool | None = None, max_awaiting_grades: int | None = None,
                 runtime_threads: int | None = None, group_size: int = 1, env_id: str = "",
                 progress: RunProgress | bool = False, grade_timeout_s: float | None = None,
                 contract_id: str | None = None, own_envs: bool = True, grade: bool = True,
                 slots: SlotBackend | None = None) -> None:
        if concurrency < 1 or group_size < 1:
            raise ConfigError(f"concurrency and group_size must be >= 1 (got {concurrency}, {group_size})")
        self.env_factory = env_factory
        self.policy = as_async_policy(policy)
        self.concurrency = concurrency
        self._own_verifier = verifier is None
        self.verifier = verifier if verifier is not None else VerifierPool()
        self.inline_verification = (self.verifier.backend == "inline" if inline_verification is None
                                    else inline_verification)
        least = MIN_AWAITING_GRADES if self.verifier.backend == "process" else 0
        self.max_awaiting_grades = max_awaiting_grades or max(4 * concurrency, least)
        self.runtime_threads = concurrency if runtime_threads is None else runtime_threads
        if self.runtime_threads < 0:
            raise ConfigError("runtime_threads must be >= 0")
        self.group_size = group_size
        self.env_id = env_id
        self.progress = RunProgress() if progress is True else (progress or None)
        self.grade_timeout_s = grade_timeout_s
        self.contract_id = contract_id
        self.own_envs = own_envs
        self.grade = grade
        self.slots: SlotBackend = slots if slots is not None else LocalSlots(own_envs=own_envs)
        self._policy_takes_seed = "seed" in inspect.signature(self.policy.start_episode).parameters
        self.counters = RunCounters()
        #: Seconds slots spent generating (inside episodes), and the run's wall time.
        self.generation_s = 0.0
        self.wall_s = 0.0

    # ------------------------------------------------------------------ run
    async def run(self, plan: Iterable[EpisodePlan], *, sink: Sink | None = None,
                  on_episode: Callable[[Trajectory], None] | None = None,
                  collect: bool = True) -> list[Trajectory]:
        """Run every planned episode; return the trajectories (in completion order) if ``collect``."""
        state = _RunState(list(plan), sink, on_episode, collect, self.max_awaiting_grades)
        self.counters = RunCounters(total=len(state.plans))
        self.generation_s = 0.0
        if self.grade and state.plans:
            self.verifier.start()  # workers boot while the envs are built and the first calls made
        self.slots.start(self.env_factory, concurrency=self.concurrency,
                         runtime_threads=self.runtime_threads)
        started = time.perf_counter()
        try:
            if self.progress is not None:
                self.progress.__enter__()
            await self._run_slots(state)
        finally:
            self._close_run(state, started)
        self._check_delivered(state)
        return state.results

    async def _run_slots(self, state: _RunState) -> None:
        slots = [asyncio.create_task(self._slot(state))
                 for _ in range(min(self.concurrency, len(state.plans)))]
        try:
            await asyncio.gather(*slots)
        except BaseException:
            for task in slots:
                task.cancel()
            raise
        while state.grading:
            await asyncio.gather(*list(state.grading))

    def _close_run(self, state: _RunState, started: float) -> None:
        for task in state.grading:
            task.cancel()
        self.wall_s = time.perf_counter() - started
        if self.progress is not None:
            self.progress.__exit__(None, None, None)
        for env in state.envs:
            env.close()
        self.slots.shutdown()
        if state.writer is not None:
            state.writer.shutdown()
        if self._own_verifier:
            self.verifier.close()

    def _check_delivered(self, state: _RunState) -> None:
        planned = len(state.plans)
        if state.fatal:
            cause = state.fatal[0]
            why = str(cause) if isinstance(cause, ProofgymError) else describe_exception(cause)
            raise RolloutError(f"the run stopped after {self.counters.done} of {planned} episodes: "
                               f"delivering an episode failed: {why}") from cause
        if self.counters.done != planned:
            raise RolloutError(f"the run delivered {self.counters.done} of {planned} planned "
                               "episodes; this is a proofgym bug, please report it")

    async def _slot(self, state: _RunState) -> None:
        """One slot: take the next planned episode, play it, hand it to grading; repeat."""
        env = await self._fresh_slot(state)
        for plan in state.queue:
            if state.fatal:
                return
            self.counters.in_flight += 1
            self._show()
            t0 = time.perf_counter()
            try:
                env, traj, job = await self._play(state, env, plan)
            finally:
                self.generation_s += time.perf_counter() - t0
                self.counters.in_flight -= 1
            if job is None or self.inline_verification:
                try:
                    if job is not None:
                        await self._grade(traj, job)
                    await self._deliver(state, traj)
                except Exception as exc:  # the run stops and raises it, like a grading task
                    state.fatal.append(exc)
                    return
            else:
                await state.room.acquire()  # backpressure: wait while too many await grades
                self.counters.awaiting_grades += 1
                task = asyncio.create_task(self._grade_and_deliver(state, traj, job))
                state.grading.add(task)
                task.add_done_callback(state.grading.discard)

    async def _fresh_slot(self, state: _RunState) -> EnvSlot | None:
        try:
            env = await self.slots.open()
        except SlotLostError as exc:  # no room or no node now: this episode is an error record
            log.warning("could not open an env slot: %s", exc)
            return None
        state.envs.append(env)
        return env

    async def _play(self, state: _RunState, env: EnvSlot | None, plan: EpisodePlan,
                    ) -> tuple[EnvSlot | None, Trajectory, VerificationJob | None]:
        """The episode, re-run in a fresh slot when its slot was lost (bounded)."""
        for retry in range(self.slots.episode_retries + 1):
            if env is None or env.lost:
                if env is not None:
                    state.envs.remove(env)
                    env.close()
                env = await self._fresh_slot(state)
                if env is None:
                    continue
            traj, job = await self._episode(env, plan)
            if retry:
                traj.extra["rollout"] = {**traj.extra.get("rollout", {}), "reruns": retry}
            if not env.lost:
                return env, traj, job
            log.warning("episode %s lost its env slot (%s); %s", traj.trajectory_id, traj.error,
                        "re-running it" if retry < self.slots.episode_retries else "recording an error")
        if env is None:  # never got a slot: an infrastructure error record, re-run by --resume
            why = f"no env slot could be opened ({self.slots.name} backend: no room or no live node)"
            return None, self._recorder(plan).fail(why), None
        return env, traj, job

    async def _deliver(self, state: _RunState, traj: Trajectory) -> None:
        if state.writer is not None:
            await state.writer.write(traj)
        if traj.status == "error":
            self.counters.errors += 1
        elif traj.verdict is not None and traj.verdict.status == "error":
            self.counters.grader_errors += 1
        self.counters.done += 1
        if state.collect:
            state.results.append(traj)
        if state.on_episode is not None:
            state.on_episode(traj)
        self._show()

    async def _grade_and_deliver(self, state: _RunState, traj: Trajectory, job: VerificationJob) -> None:
        try:
            await self._grade(traj, job)
            await self._deliver(state, traj)
        except Exception as exc:  # kept, not lost with the task: the run raises it
            state.fatal.append(exc)
        finally:
            self.counters.awaiting_grades -= 1
            state.room.release()

    @property
    def slot_busy_fraction(self) -> float:
        """Fraction of slot time spent generating, over the last run."""
        return self.generation_s / (self.concurrency * self.wall_s) if self.wall_s else 0.0

    def _show(self) -> None:
        if self.progress is not None:
            self.progress.update(self.counters)

    # -------------------------------------------------------------- episode
    def _recorder(self, plan: EpisodePlan, task: Task | None = None, prompt: str = "",
                  tools: list[dict[str, Any]] | None = None) -> EpisodeRecorder:
        # the plan's id (a caller may name a single episode); under a contract, the derived one
        return EpisodeRecorder.start(plan, env_id=self.env_id, policy=self.policy.describe(), task=task,
                                     prompt=prompt, tools=tools, contract_id=self.contract_id,
                                     group_size=self.group_size)

    async def _episode(self, env: EnvSlot, plan: EpisodePlan) -> tuple[Trajectory, VerificationJob | None]:
        """Play one episode; never raises (a failure is an error trajectory without a job)."""
        started = time.perf_counter()
        options: dict[str, Any] = ({"task": plan.task} if plan.task is not None
                                   else {"task_id": plan.task_id or None})
        try:
            obs, info = await env.reset(plan.seed, options)
        except Exception as exc:
            recorder = self._recorder(plan)
            recorder.started = started
            recorder.trajectory.extra["rollout"] = env.where
            return recorder.fail(f"env.reset failed: {describe_exception(exc)}"), None
        task = env.current_task
        assert task is not None and env.current_spec is not None
        recorder = self._recorder(plan, task, env.current_spec.prompt, info["tools"])
        recorder.started = started
        recorder.trajectory.extra["rollout"] = env.where
        session: PolicySession | None = None
        try:
            session = await self._start_policy(task, obs, info, env, plan)
            await self._steps(session, env, obs, recorder)
            job = await env.verification_job(recorder.trace()) if self.grade else None
        except Exception as exc:  # this episode's failure only: recorded, the run goes on
            return recorder.fail(describe_exception(exc)), None
        finally:
            if session is not None:
                await _close_quietly(session)
        return recorder.finish(), job

    async def _start_policy(self, task: Task, obs: dict[str, Any], info: dict[str, Any], env: EnvSlot,
                            plan: EpisodePlan) -> PolicySession:
        if self._policy_takes_seed:  # its randomness from (policy seed, episode seed)
            return await self.policy.start_episode(task, obs, info, env.action_space,
                                                   seed=plan.seed)  # type: ignore[call-arg]
        return await self.policy.start_episode(task, obs, info, env.action_space)

    @staticmethod
    async def _steps(session: PolicySession, env: EnvSlot, obs: dict[str, Any],
                     recorder: EpisodeRecorder) -> None:
        for _ in range(MAX_STEPS):
            t0 = time.perf_counter()
            decision = await session.act(obs)
            t1 = time.perf_counter()
            tokens = decision.usage.get("total_tokens")
            if tokens:
                env.charge(int(tokens))
            obs, _reward, terminated, truncated, info = await env.step(decision.action)
            if recorder.step(decision.action, obs, terminated, truncated, info, policy_s=t1 - t0,
                             env_s=time.perf_counter() - t1, usage=decision.usage):
                return
        raise RolloutError(f"episode exceeded {MAX_STEPS} steps without ending; set Limits")

    async def _grade(self, traj: Trajectory, job: VerificationJob) -> None:
        t0 = time.perf_counter()
        try:
            # booked: the time the job ran in its worker, not its queueing or the pool's start-up
            traj.verdict, traj.timings["verify_s"] = await self.verifier.grade_timed(
                job, traj.trajectory_id, timeout_s=self.grade_timeout_s, contract_id=self.contract_id or "")
        except Exception as exc:  # the pool itself failed (closed, ...): an error verdict, not a loss
            traj.verdict = Verdict.failed(f"grading could not run: {describe_exception(exc)}")
            traj.timings["verify_s"] = time.perf_counter() - t0
        traj.extra["verifier"] = self.verifier.describe()
        traj.artifact = job.artifact.to_dict()  # kept so `proofgym verify` can re-grade


async def _close_quietly(session: PolicySession) -> None:
    close = getattr(session, "aclose", None)
    if close is not None:
        try:
            await close()
        except Exception as exc:  # closing a finished session must not turn a result into an error
            log.warning("policy session close failed: %s", describe_exception(exc))
