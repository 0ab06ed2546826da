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
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from proofgym.core import (
    AgentAction,
    ConfigError,
    ProofgymError,
    Task,
    TraceStep,
    Verdict,
    describe_exception,
)
from proofgym.core.defaults import DEFAULTS
from proofgym.env import UniversalVerifiableEnv, VerificationJob
from proofgym.record import StepRecord, Trajectory, stamp, trajectory_id_for
from proofgym.rollout.async_policy import AsyncPolicy, PolicySession, as_async_policy
from proofgym.rollout.ordered_writer import OrderedWriter
from proofgym.rollout.policies import Policy
from proofgym.rollout.progress import RunCounters, RunProgress
from proofgym.rollout.slots import EnvSlot, LocalSlots, SlotBackend, SlotLostError
from proofgym.verify.pool import VerifierPool

log = logging.getLogger(__name__)

#: Hard stop for a runaway loop (a policy that never ends its turn in an env without budgets).
MAX_STEPS = 10_000

#: The least default backpressure bound with a ``process`` pool: a fresh one takes seconds to boot
#: (its workers import the graders' code) while fast episodes finish by the dozen per second;
#: slots keep generating through that start-up instead of stalling at ``4 * concurrency``.
MIN_AWAITING_GRADES = 256


class RolloutError(ProofgymError, RuntimeError):
    """A run could not deliver its episodes (the sink or ``on_episode`` failed); it stopped."""

    exit_code = 1


class RunFailedError(RolloutError):
    """A run finished but failed as a whole: every episode ended in an error (or, as
    :class:`ErrorBudgetExceeded`, more went unscored than its budget allows). The run is
    recorded; ``trajectories`` and ``summary`` are what ``evaluate()`` would have returned."""

    def __init__(self, message: str, *, trajectories: Sequence[Trajectory] = (),
                 summary: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.trajectories = list(trajectories)
        self.summary: dict[str, Any] = summary or {}


class ErrorBudgetExceeded(RunFailedError):
    """A larger share of the run's episodes went unscored (grader or episode errors) than its
    ``max_error_rate`` allows (``error_rate`` > ``max_error_rate``)."""

    exit_code = 3

    def __init__(self, message: str, *, error_rate: float, max_error_rate: float,
                 trajectories: Sequence[Trajectory] = (), summary: dict[str, Any] | None = None) -> None:
        super().__init__(message, trajectories=trajectories, summary=summary)
        self.error_rate, self.max_error_rate = error_rate, max_error_rate


def record_step(traj: Trajectory, trace: list[TraceStep], action: AgentAction, obs: dict[str, Any],
                terminated: bool, truncated: bool, info: dict[str, Any], policy_s: float,
                env_s: float, usage: dict[str, Any] | None = None) -> bool:
    """Append one step to the trajectory and the grader's trace; True when the episode ended."""
    traj.steps.append(StepRecord(action, obs, info, policy_s, env_s, usage or {}))
    trace.append(TraceStep(action, obs))
    if terminated or truncated:
        traj.terminated, traj.truncated = bool(terminated), bool(truncated)
        traj.truncation_reason = info.get("truncation_reason")
        return True
    return False


class PlannedEpisode(Protocol):
    """One planned episode (``proofgym.eval.EpisodeSpec`` is one)."""

    task_id: str
    attempt: int
    seed: int | None

    @property
    def key(self) -> str: ...


class Sink(Protocol):
    """Where delivered trajectories go (``proofgym.eval.TrajectorySink``)."""

    def write(self, trajectory: Trajectory) -> None: ...


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
    async def run(self, plan: Iterable[PlannedEpisode], *, sink: Sink | None = None,
                  on_episode: Callable[[Trajectory], None] | None = None,
                  collect: bool = True) -> list[Trajectory]:
        """Run every planned episode; return the trajectories (in completion order) if ``collect``."""
        specs = list(plan)
        self.counters = RunCounters(total=len(specs))
        self.generation_s = 0.0
        results: list[Trajectory] = []
        queue = iter(specs)
        if self.grade and specs:
            self.verifier.start()  # workers boot while the envs are built and the first calls made
        self.slots.start(self.env_factory, concurrency=self.concurrency,
                         runtime_threads=self.runtime_threads)
        writer = OrderedWriter(sink) if sink is not None else None
        grading: set[asyncio.Task[None]] = set()
        room = asyncio.Semaphore(self.max_awaiting_grades)
        envs: list[EnvSlot] = []

        fatal: list[BaseException] = []  # delivery failures: the run stops and raises

        async def deliver(traj: Trajectory) -> None:
            if writer is not None:
                await writer.write(traj)
            if traj.status == "error":
                self.counters.errors += 1
            elif traj.verdict is not None and traj.verdict.status == "error":
                self.counters.grader_errors += 1
            self.counters.done += 1
            if collect:
                results.append(traj)
            if on_episode is not None:
                on_episode(traj)
            self._show()

        async def grade_and_deliver(traj: Trajectory, job: VerificationJob) -> None:
            try:
                await self._grade(traj, job)
                await deliver(traj)
            except Exception as exc:  # kept, not lost with the task: the run raises it
                fatal.append(exc)
            finally:
                self.counters.awaiting_grades -= 1
                room.release()

        async def fresh_slot() -> EnvSlot | None:
            try:
                env = await self.slots.open()
            except SlotLostError as exc:  # no room or no node now: this episode is an error record
                log.warning("could not open an env slot: %s", exc)
                return None
            envs.append(env)
            return env

        async def play(env: EnvSlot | None, spec: PlannedEpisode,
                       ) -> tuple[EnvSlot | None, Trajectory, VerificationJob | None]:
            """The episode, re-run in a fresh slot when its slot was lost (bounded)."""
            for retry in range(self.slots.episode_retries + 1):
                if env is None or env.lost:
                    if env is not None:
                        envs.remove(env)
                        env.close()
                    env = await fresh_slot()
                    if env is None:
                        continue
                traj, job = await self._episode(env, spec)
                if retry:
                    traj.extra["rollout"] = {**traj.extra.get("rollout", {}), "reruns": retry}
                if not env.lost:
                    return env, traj, job
                log.warning("episode %s lost its env slot (%s); %s", traj.trajectory_id, traj.error,
                            "re-running it" if retry < self.slots.episode_retries else "recording an error")
            if env is None:  # never got a slot: an infrastructure error record, re-run by --resume
                why = f"no env slot could be opened ({self.slots.name} backend: no room or no live node)"
                traj = self._failed(self._blank(spec), why, time.perf_counter())
                return None, traj, None
            return env, traj, job

        async def slot() -> None:
            env = await fresh_slot()
            for spec in queue:
                if fatal:
                    return
                self.counters.in_flight += 1
                self._show()
                t0 = time.perf_counter()
                try:
                    env, traj, job = await play(env, spec)
                finally:
                    self.generation_s += time.perf_counter() - t0
                    self.counters.in_flight -= 1
                if job is None or self.inline_verification:
                    try:
                        if job is not None:
                            await self._grade(traj, job)
                        await deliver(traj)
                    except Exception as exc:  # the run stops and raises it, like a grading task
                        fatal.append(exc)
                        return
                else:
                    await room.acquire()  # backpressure: wait while too many await grades
                    self.counters.awaiting_grades += 1
                    task = asyncio.create_task(grade_and_deliver(traj, job))
                    grading.add(task)
                    task.add_done_callback(grading.discard)

        started = time.perf_counter()
        try:
            if self.progress is not None:
                self.progress.__enter__()
            slots = [asyncio.create_task(slot()) for _ in range(min(self.concurrency, len(specs)))]
            try:
                await asyncio.gather(*slots)
            except BaseException:
                for task in slots:
                    task.cancel()
                raise
            while grading:
                await asyncio.gather(*list(grading))
        finally:
            for task in grading:
                task.cancel()
            self.wall_s = time.perf_counter() - started
            if self.progress is not None:
                self.progress.__exit__(None, None, None)
            for env in envs:
                env.close()
            self.slots.shutdown()
            if writer is not None:
                writer.shutdown()
            if self._own_verifier:
                self.verifier.close()
        if fatal:
            cause = fatal[0]
            why = str(cause) if isinstance(cause, ProofgymError) else describe_exception(cause)
            raise RolloutError(f"the run stopped after {self.counters.done} of {len(specs)} episodes: "
                               f"delivering an episode failed: {why}") from cause
        if self.counters.done != len(specs):
            raise RolloutError(f"the run delivered {self.counters.done} of {len(specs)} planned "
                               "episodes; this is a proofgym bug, please report it")
        return results

    @property
    def slot_busy_fraction(self) -> float:
        """Fraction of slot time spent generating, over the last run."""
        return self.generation_s / (self.concurrency * self.wall_s) if self.wall_s else 0.0

    def _show(self) -> None:
        if self.progress is not None:
            self.progress.update(self.counters)

    # -------------------------------------------------------------- episode
    def _blank(self, spec: PlannedEpisode) -> Trajectory:
        # the plan's id (a caller may name a single episode); under a contract _mark stamps the derived one
        traj = Trajectory(trajectory_id=spec.key, env_id=self.env_id, task_id=spec.task_id,
                          task_hash="", seed=spec.seed, policy=self.policy.describe(), prompt="", tools=[])
        self._mark(traj, spec)
        return traj

    async def _episode(self, env: EnvSlot, spec: PlannedEpisode) -> tuple[Trajectory, VerificationJob | None]:
        """Play one episode; never raises (a failure is an error trajectory without a job)."""
        started = time.perf_counter()
        described = self.policy.describe()
        given: Task | None = getattr(spec, "task", None)
        options: dict[str, Any] = {"task": given} if given is not None else {"task_id": spec.task_id or None}
        try:
            obs, info = await env.reset(spec.seed, options)
        except Exception as exc:
            traj = self._blank(spec)
            traj.extra["rollout"] = env.where
            return self._failed(traj, f"env.reset failed: {describe_exception(exc)}", started), None
        task = env.current_task
        assert task is not None and env.current_spec is not None
        # the env sampled the task when the plan names none: its id is known only now
        traj = Trajectory(trajectory_id=spec.key or trajectory_id_for(None, task.id, spec.attempt),
                          env_id=self.env_id, task_id=task.id,
                          task_hash=task.content_hash, seed=spec.seed, policy=described,
                          prompt=env.current_spec.prompt, tools=info["tools"])
        self._mark(traj, spec)
        traj.extra["rollout"] = env.where
        steps: list[TraceStep] = []
        policy_s = env_s = 0.0
        session: PolicySession | None = None
        try:
            if self._policy_takes_seed:  # its randomness from (policy seed, episode seed)
                session = await self.policy.start_episode(task, obs, info, env.action_space,
                                                          seed=spec.seed)  # type: ignore[call-arg]
            else:
                session = await self.policy.start_episode(task, obs, info, env.action_space)
            for _ in range(MAX_STEPS):
                t0 = time.perf_counter()
                decision = await session.act(obs)
                t1 = time.perf_counter()
                tokens = decision.usage.get("total_tokens")
                if tokens:
                    env.charge(int(tokens))
                obs, _reward, terminated, truncated, info = await env.step(decision.action)
                t2 = time.perf_counter()
                policy_s += t1 - t0
                env_s += t2 - t1
                if record_step(traj, steps, decision.action, obs, terminated, truncated, info,
                               t1 - t0, t2 - t1, decision.usage):
                    break
            else:
                raise RuntimeError(f"episode exceeded {MAX_STEPS} steps without ending; set Limits")
            job = await env.verification_job(steps) if self.grade else None
        except Exception as exc:  # this episode's failure only: recorded, the run goes on
            return self._failed(traj, describe_exception(exc), started, policy_s, env_s), None
        finally:
            if session is not None:
                await _close_quietly(session)
        traj.timings = {"policy_s": policy_s, "env_s": env_s, "verify_s": 0.0,
                        "total_s": time.perf_counter() - started}
        return traj, job

    def _mark(self, traj: Trajectory, spec: PlannedEpisode) -> None:
        stamp(traj, self.contract_id, attempt=spec.attempt)
        traj.extra["group"] = {"id": f"{spec.task_id}@{spec.attempt // self.group_size}",
                               "index": spec.attempt % self.group_size, "size": self.group_size}

    @staticmethod
    def _failed(traj: Trajectory, error: str, started: float, policy_s: float = 0.0,
                env_s: float = 0.0) -> Trajectory:
        traj.status, traj.error = "error", error
        traj.verdict = Verdict.unscored(f"episode failed: {error}")
        traj.timings = {"policy_s": policy_s, "env_s": env_s, "verify_s": 0.0,
                        "total_s": time.perf_counter() - started}
        return traj

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
