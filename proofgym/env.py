"""``UniversalVerifiableEnv``: one Gymnasium env for every task, with step and turn boundaries."""

from __future__ import annotations

import concurrent.futures as cf
import copy
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any, Protocol, SupportsFloat, runtime_checkable

import gymnasium as gym

from proofgym.core import (
    AgentAction,
    EpisodeStateError,
    Limits,
    Task,
    TaskSpec,
    ToolCallAction,
    Trace,
    TruncationReason,
    TurnCompleteAction,
    Verdict,
    grade,
)
from proofgym.core.errors import ConfigError, TaskSpecError
from proofgym.runtimes import Artifact, Runtime
from proofgym.spaces import ToolCallSpace, observation_space
from proofgym.tasks import TaskSet
from proofgym.tools import cut_output

Observation = dict[str, Any]
StepResult = tuple[Observation, float, bool, bool, dict[str, Any]]


@dataclass(frozen=True)
class VerificationJob:
    """Everything needed to grade an episode, independent of the env that ran it.

    ``verifier_version`` picks the grader: ``None`` (the task's own ``verify``) or a version the
    task keeps in ``verifiers()`` (re-grading with an earlier or candidate grader).

    ``verdict``: the job is *settled*: it was graded where the episode ran (a served env's server
    returns the verdict with the step that ends the episode), so :meth:`run` and a
    ``VerifierPool`` answer with it at once, and no grader runs here.
    """

    task: Task
    trace: Trace
    artifact: Artifact
    verifier_version: str | None = None
    verdict: Verdict | None = None

    @property
    def version(self) -> str:
        """The verifier version this job grades with."""
        return str(self.task.verifier_version) if self.verifier_version is None else self.verifier_version

    def run(self) -> Verdict:
        """Grade here, in this thread: no timeout, and a grader that kills its process kills
        this one. Callers that must survive a bad grader submit the job to a ``VerifierPool``."""
        if self.verdict is not None:
            return self.verdict
        return grade(self.task, self.trace, self.artifact.view(), self.verifier_version)


class JobGrader(Protocol):
    """Where :meth:`UniversalVerifiableEnv.verify` can send a job: a
    :class:`~proofgym.verify.pool.VerifierPool` (timeouts, crash isolation)."""

    def submit(self, job: VerificationJob, trajectory_id: str, *, timeout_s: float | None = None,
               contract_id: str = "") -> cf.Future[Verdict]: ...


@runtime_checkable
class VerifiableEnv(Protocol):
    """What the library asks of an env: :class:`UniversalVerifiableEnv` (the local engine) and
    :class:`~proofgym.remote.RemoteEnv` (one over ``proofgym serve``) are peers under it.

    ``tasks``, ``limits`` and ``runtime`` (its ``tools`` and ``config()``) describe the env for the
    rollout contract; ``current_task``/``current_spec`` are valid after ``reset``;
    :meth:`verification_job` freezes a finished episode for grading (a settled job, with its
    verdict, when the env was graded where it ran).
    """

    tasks: TaskSet | None
    limits: Limits
    runtime: Any
    current_task: Task | None
    current_spec: TaskSpec | None
    action_space: Any
    observation_space: Any
    #: Each finished episode is graded where it ran and its job comes settled (with its verdict):
    #: a run then starts no grader worker of its own.
    grades_itself: bool

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[Observation, dict[str, Any]]: ...

    def step(self, action: AgentAction) -> tuple[Observation, SupportsFloat, bool, bool, dict[str, Any]]: ...

    def charge(self, *, tokens: int = 0, cost: float = 0.0) -> None: ...

    def verification_job(self, trace: Trace | list[Any]) -> VerificationJob: ...

    def close(self) -> None: ...


class UniversalVerifiableEnv(gym.Env[Observation, AgentAction]):
    """A stateless Gymnasium engine for verifiable LLM-agent tasks.

    * **Step boundary**: a :class:`ToolCallAction` runs in the runtime; reward ``0.0``; the
      observation is the tool's output (``type="tool_output"``) or a structured error
      (``type="tool_error"``, ``info["error_kind"]``). Bad calls never raise.
    * **Turn boundary**: a :class:`TurnCompleteAction` ends the agent's turn; the task answers with
      the next message (``type="turn_transition"``) or ends the episode (``terminated``,
      ``type="episode_end"``).
    * **Budgets** (:class:`Limits`) *truncate*: ``truncated=True`` and
      ``info["truncation_reason"]`` in ``turns, tool_calls, wall_time, tokens, cost, context``.
    * **Rewards** from ``step`` are always ``0.0``: grading is out of band, through
      :meth:`verify` or :meth:`verification_job`, on a frozen snapshot of the final state.
    * The env does not keep the trace; ``info`` holds only deterministic facts (no timings), so the
      same seed and actions give the same observations and infos.

    Args:
        runtime_backend: Where tool calls run; its tools are the tools of every task.
        max_turns: Turn budget; when given it overrides ``limits.max_turns``, when omitted the
            ``limits`` decide (default 8).
        tasks: A :class:`TaskSet` (or iterable of tasks) that ``reset()`` samples from when no
            task is given in ``options``.
        limits: Other budgets.
        render_mode: ``None`` (no rendering) or ``"ansi"``: :meth:`render` returns the current
            episode's transcript as text (kept only in this mode).
    """

    grades_itself = False  # its episodes are graded by the caller's verifier (a VerifierPool)
    # render_fps: Gymnasium's checker wants one for any render mode; a transcript has no frame rate
    metadata: dict[str, Any] = {"render_modes": ["ansi"], "render_fps": 1}  # noqa: RUF012

    def __init__(self, runtime_backend: Runtime, max_turns: int | None = None, *,
                 tasks: TaskSet | Iterable[Task] | None = None,
                 limits: Limits | None = None, render_mode: str | None = None) -> None:
        super().__init__()
        self.render_mode = check_render_mode(render_mode)
        self._transcript: list[str] = []
        self.runtime = runtime_backend
        self.limits = limits or Limits()
        if max_turns is not None:
            self.limits = replace(self.limits, max_turns=max_turns)
        self.max_turns = self.limits.max_turns
        self.tasks = tasks if tasks is None or isinstance(tasks, TaskSet) else TaskSet(tasks)
        self.observation_space = observation_space(self.max_turns, max_chars=1 << 22)
        self.action_space = ToolCallSpace(self.runtime.tools.schemas())
        self.current_task: Task | None = None
        self.current_spec: TaskSpec | None = None
        self._last: VerificationJob | None = None
        self._clear_episode()

    def _clear_episode(self) -> None:
        self.current_turn = 0
        self.tool_calls = 0
        self.tokens = 0
        self.cost = 0.0
        self.context_chars = 0
        self._started = 0.0
        self._done = True
        self._artifact: Artifact | None = None

    # ------------------------------------------------------------------ reset
    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[Observation, dict[str, Any]]:
        """Start an episode.

        The task is ``options["task"]`` (a :class:`Task`), else ``options["task_id"]`` looked up in
        the env's task set, else a task sampled from the task set with ``self.np_random``.
        """
        super().reset(seed=seed)
        task = self._choose_task(options or {})
        self._clear_episode()
        self.runtime.reset()
        task.setup_runtime(self.runtime)
        hold = getattr(self.runtime, "hold_hidden_key", None)
        if hold is not None:  # (waits while a grading of the task's hidden key runs or waits)
            hold(task.hidden_key)
        spec = self._complete_spec(task)
        if not self.observation_space["observation"].contains(spec.prompt):
            raise TaskSpecError(f"task {task.id!r}: prompt is not a str within the observation limit")
        self.current_task, self.current_spec = task, spec
        self._started = time.monotonic()
        self._done = False
        self.context_chars = len(spec.prompt)
        obs = {"turn": 0, "observation": spec.prompt, "type": "turn_init"}
        if self.render_mode == "ansi":
            self._transcript = [f"[task {task.id}]", f"user: {spec.prompt}"]
        # spec.tools equals the runtime's schemas (_complete_spec); a fresh copy of those is
        # cheaper than copy.deepcopy of the spec's
        info = {"task_id": task.id, "tools": self.runtime.tools.schemas(),
                "metadata": copy.deepcopy(spec.metadata or {})}
        return obs, info

    def _choose_task(self, options: dict[str, Any]) -> Task:
        if options.get("task") is not None:
            task = options["task"]
            if not isinstance(task, Task):
                raise TypeError(f"options['task'] must be a Task, got {type(task).__name__}")
            return task
        if options.get("task_id") is not None:
            if self.tasks is None:
                raise ConfigError("options['task_id'] needs an env built with tasks=TaskSet(...)")
            return self.tasks.get(options["task_id"])
        if self.tasks is None:
            raise ConfigError(
                "no task to run: build the env with tasks=TaskSet(...) so reset() can sample one, "
                "or pass options={'task': task} or options={'task_id': id}"
            )
        return self.tasks.sample(self.np_random)

    def _complete_spec(self, task: Task) -> TaskSpec:
        spec = task.get_spec()
        schemas = self.runtime.tools.schemas()
        if spec.tools is None:
            return replace(spec, tools=schemas)
        if spec.tools != schemas:
            raise TaskSpecError(
                f"task {task.id!r} declares tool schemas that differ from the runtime's; leave "
                "TaskSpec.tools as None and the env fills it from the runtime (one source)"
            )
        return spec

    # ------------------------------------------------------------------- step
    def step(self, action: AgentAction) -> tuple[Observation, SupportsFloat, bool, bool, dict[str, Any]]:
        if self.current_task is None or self._done:
            raise EpisodeStateError(
                "step() called " + ("before reset()" if self.current_task is None
                                    else "after the episode ended") + "; call reset() first"
            )
        if not isinstance(action, (ToolCallAction, TurnCompleteAction)):
            raise TypeError(
                f"action must be a ToolCallAction or TurnCompleteAction, got {type(action).__name__}"
            )
        over = self._exhausted_budget()
        if over is not None:
            result = self._truncate(over, "")
        elif isinstance(action, ToolCallAction):
            result = self._tool_step(action)
        else:
            result = self._turn_step(action)
        if self.render_mode == "ansi":
            self._transcript += transcript_lines(action, result)
        return result

    def render(self) -> str | None:  # type: ignore[override]
        """With ``render_mode="ansi"``: the current episode so far, one line per message or call
        (``None`` in the default mode, which keeps no transcript)."""
        if self.render_mode != "ansi":
            return None
        return "\n".join(self._transcript) + "\n"

    def _tool_step(self, action: ToolCallAction) -> StepResult:
        if self.limits.max_tool_calls is not None and self.tool_calls >= self.limits.max_tool_calls:
            return self._truncate(
                TruncationReason.TOOL_CALLS,
                f"tool call budget ({self.limits.max_tool_calls}) exhausted; the call was not run",
            )
        self.tool_calls += 1
        result = self.runtime.execute(action.tool_name, action.tool_input)
        text, was_cut = cut_output(result.output, self.limits.max_observation_chars)
        info: dict[str, Any] = {"tool_name": action.tool_name,
                                "output_truncated": was_cut or result.truncated}
        if result.ok:
            obs = {"turn": self.current_turn, "observation": text, "type": "tool_output"}
        else:
            obs = {"turn": self.current_turn, "observation": text, "type": "tool_error"}
            info["error_kind"] = result.error_kind.value  # type: ignore[union-attr]
        self.context_chars += len(str(action.tool_input)) + len(text)
        return self._after_step(obs, info)

    def _turn_step(self, action: TurnCompleteAction) -> StepResult:
        assert self.current_task is not None
        self.current_turn += 1
        reply = self.current_task.on_turn_complete(action.message, self.runtime)
        self.context_chars += len(action.message)
        if reply is None:
            obs = {"turn": self.current_turn, "observation": "", "type": "episode_end"}
            return self._finish(obs, {}, terminated=True)
        self.context_chars += len(reply)
        obs = {"turn": self.current_turn, "observation": reply, "type": "turn_transition"}
        if self.current_turn >= self.max_turns:
            return self._finish(obs, {"truncation_reason": TruncationReason.TURNS.value},
                                truncated=True)
        return self._after_step(obs, {})

    def _after_step(self, obs: Observation, info: dict[str, Any]) -> StepResult:
        over = self._exhausted_budget()
        if over is not None:
            info["truncation_reason"] = over.value
            return self._finish(obs, info, truncated=True)
        return obs, 0.0, False, False, info

    def _truncate(self, reason: TruncationReason, message: str) -> StepResult:
        obs = {"turn": self.current_turn, "observation": message, "type": "episode_end"}
        return self._finish(obs, {"truncation_reason": reason.value}, truncated=True)

    def _finish(self, obs: Observation, info: dict[str, Any], *, terminated: bool = False,
                truncated: bool = False) -> StepResult:
        self._done = True
        self._artifact = self.runtime.snapshot()
        return obs, 0.0, terminated, truncated, info

    def _exhausted_budget(self) -> TruncationReason | None:
        lim = self.limits
        if lim.max_wall_time_s is not None and time.monotonic() - self._started > lim.max_wall_time_s:
            return TruncationReason.WALL_TIME
        if lim.max_tokens is not None and self.tokens > lim.max_tokens:
            return TruncationReason.TOKENS
        if lim.max_cost is not None and self.cost > lim.max_cost:
            return TruncationReason.COST
        if lim.max_context_chars is not None and self.context_chars > lim.max_context_chars:
            return TruncationReason.CONTEXT
        return None

    def charge(self, *, tokens: int = 0, cost: float = 0.0) -> None:
        """Record what the policy spent producing the next action (checked against the token
        and cost budgets at the next step)."""
        if tokens < 0 or cost < 0:
            raise ConfigError("tokens and cost must be non-negative")
        self.tokens += tokens
        self.cost += cost

    # ----------------------------------------------------------------- verify
    @property
    def episode_over(self) -> bool:
        return self._done and self.current_task is not None

    def verification_job(self, trace: Trace | list[Any]) -> VerificationJob:
        """Freeze the episode for out-of-band grading: task, trace and the final-state artifact.

        After the episode ended the artifact is the one frozen at its end; mid-episode it is a
        snapshot taken now. The job is independent of the env, which may ``reset`` at once.
        """
        if self.current_task is None:
            raise EpisodeStateError("verify() needs an episode: call reset() and step() first")
        artifact = self._artifact if self._done and self._artifact else self.runtime.snapshot()
        return VerificationJob(self.current_task, Trace.coerce(trace), artifact)

    #: The trace :meth:`grading_job` freezes. Vector envs set it per env
    #: (``vec.set_attr("grading_trace", traces)``), since ``vec.call`` passes every env the same
    #: arguments; see :func:`proofgym.verify.pool.vector.verify_vector`.
    grading_trace: Trace | list[Any] | None = None

    def grading_job(self) -> VerificationJob:
        """:meth:`verification_job` of :attr:`grading_trace` (which is then cleared)."""
        if self.grading_trace is None:
            raise ConfigError("no grading_trace set: set it first (vec.set_attr('grading_trace', "
                              "traces)) or call verification_job(trace)")
        trace, self.grading_trace = self.grading_trace, None
        return self.verification_job(trace)

    def verify(self, trace: Trace | list[Any], *, pool: JobGrader | None = None,
               timeout_s: float | None = None) -> Verdict:
        """Grade ``trace`` against the current (or just finished) episode. Never raises for a
        grader failure: that is a ``Verdict`` with ``status="error"``.

        Without ``pool`` the grader runs here, in this thread, with no time limit. With a
        :class:`~proofgym.verify.pool.VerifierPool` (``pool=``) it runs there, isolated: a grader
        that raises, runs past ``timeout_s`` (default: the pool's) or kills its process (the
        ``process`` backend) is an error verdict with the reason, and this process carries on.
        """
        job = self.verification_job(trace)
        if pool is None:
            return job.run()
        assert self.current_task is not None  # verification_job() checked it
        return pool.submit(job, f"verify/{self.current_task.id}", timeout_s=timeout_s).result()

    def close(self) -> None:
        self.runtime.close()
        super().close()


def check_render_mode(render_mode: str | None) -> str | None:
    """``render_mode`` if proofgym supports it, else a clear error."""
    supported = UniversalVerifiableEnv.metadata["render_modes"]
    if render_mode is not None and render_mode not in supported:
        raise ConfigError(f"render_mode={render_mode!r} is not supported; use None or one of "
                          f"{supported} (a text transcript of the episode)")
    return render_mode


def transcript_lines(action: AgentAction, result: StepResult) -> list[str]:
    obs, _reward, terminated, truncated, info = result
    if isinstance(action, ToolCallAction):
        lines = [f"call {action.tool_name}({action.tool_input!r})"]
    else:
        lines = [f"assistant: {action.message}"]
    kind = obs["type"]
    if kind in ("tool_output", "tool_error"):
        lines.append(f"{kind}: {obs['observation']}")
    elif kind == "turn_transition":
        lines.append(f"user: {obs['observation']}")
    if terminated or truncated:
        reason = info.get("truncation_reason")
        lines.append("[episode ended" + (f": truncated ({reason})]" if truncated else "]"))
    return lines
