"""``RemoteEnv``: a Gymnasium env over ``proofgym serve``, indistinguishable from the local one.

A peer of :class:`~proofgym.env.UniversalVerifiableEnv` under :class:`~proofgym.env.VerifiableEnv`
(not a subclass: the episode's state machine runs on the server, this is its client). Its steps go
over one HTTP session of the server's step tier (:mod:`proofgym.wire` messages over httpx): the
same seeds and task ids give the same observations and infos as the env built locally (a reset
without a task id gets a train task, unless ``allow_heldout``: the local env's draw whenever that
is one), and because the server describes its tools, limits, runtime settings and tasks (ids,
content hashes, grader versions: never their content), a run through it has the same rollout
contract, and so the same trajectory ids, as a local run.

Grading happens where the episode ran: the server grades each finished episode from what it saw
and returns the verdict with the step that ends it; :meth:`RemoteEnv.verification_job` hands it
on as a settled job, so ``evaluate``, the orchestrator and a ``VerifierPool`` take it without
running a grader or starting a worker here.

The session lives as long as the env: a held request (``GET /hold``) ties it to this process, so
a client that goes away (closed, crashed, killed) leaves no session, sandbox or process behind.

Use it where a local env goes: ``RemoteEnv("http://127.0.0.1:8000")``,
``proofgym eval ENV --env-url http://...``, ``gymnasium.make_vec("proofgym.remote:Remote-v0",
num_envs=4, vectorization_mode="sync", url=...)`` (or ``"async"``: a pickled ``RemoteEnv`` is a new
session on the same server).
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, SupportsFloat

import gymnasium
import httpx

from proofgym.core import (
    AgentAction,
    EpisodeStateError,
    Limits,
    TaskNotFoundError,
    TaskSpec,
    ToolCallAction,
    Trace,
    TurnCompleteAction,
    Verdict,
)
from proofgym.core.errors import ConfigError
from proofgym.core.tls import tls_context
from proofgym.env import UniversalVerifiableEnv, VerificationJob, check_render_mode, transcript_lines
from proofgym.remote.served import (
    RemoteError,
    RemoteRuntime,
    RemoteTask,
    ServedSpecs,
    http_base,
    request_headers,
)
from proofgym.runtimes import Artifact
from proofgym.spaces import ToolCallSpace, observation_space
from proofgym.tasks import HeldOutError, SplitManifest, TaskSet
from proofgym.wire import (
    SESSION_HEADER,
    Code,
    Described,
    Reset,
    Step,
    StepResult,
    WireError,
    decode_error_body,
)


class RemoteEnv(gymnasium.Env[dict[str, Any], AgentAction]):
    """A served env (see the module docstring).

    Args:
        url: The server (``http://HOST:PORT``; ``ws://HOST:PORT`` is read as the same server).
        token: Its bearer token, if it has one.
        allow_heldout: Reset on held-out tasks (the server then burns them).
        render_mode: ``None`` or ``"ansi"``, as the local env.
        timeout_s: Seconds one call may take (a last step waits for its grading too).
    """

    metadata: dict[str, Any] = UniversalVerifiableEnv.metadata
    grades_itself = True  # the server returns each episode's verdict with its last step

    def __init__(self, url: str, *, token: str | None = None, allow_heldout: bool = False,
                 render_mode: str | None = None, timeout_s: float = 600.0) -> None:
        super().__init__()
        self.url = http_base(url)
        self.token = token
        self.allow_heldout = allow_heldout
        self.timeout_s = timeout_s
        self.render_mode = check_render_mode(render_mode)
        self._http = httpx.Client(base_url=self.url, headers=request_headers(token),
                                  timeout=httpx.Timeout(timeout_s, connect=60.0), verify=tls_context())
        try:
            response = self._http.get("/describe", timeout=60.0)
        except httpx.HTTPError as exc:
            self._http.close()
            raise RemoteError(f"cannot reach the env server at {self.url}: {exc}") from None
        if response.status_code != 200:
            self._http.close()
            raise RemoteError(f"the env server at {self.url} refused /describe "
                              f"({response.status_code}): {response.text[:300]}")
        try:
            self.described = Described.from_dict(response.json())
        except (ValueError, WireError) as exc:
            self._http.close()
            raise RemoteError(f"the env server at {self.url} sent a malformed /describe: {exc}") from None
        self.served_env_id: str = self.described.env_id
        self.served_env_kwargs: dict[str, Any] = self.described.env_kwargs
        self.tasks: TaskSet | None = None
        if self.described.taskset is not None:
            info = self.described.taskset
            specs = ServedSpecs(self.url, token)
            self.tasks = TaskSet([RemoteTask(t, self.url, token, specs) for t in self.described.tasks],
                                 name=info["name"], manifest=SplitManifest.from_dict(info["manifest"]))
        self.runtime = RemoteRuntime(self.described)
        self.limits = Limits(**self.described.limits)
        self.max_turns = self.limits.max_turns
        self.observation_space = observation_space(self.max_turns, max_chars=1 << 22)
        self.action_space = ToolCallSpace(self.runtime.tools.schemas())
        self.current_task: RemoteTask | None = None
        self.current_spec: TaskSpec | None = None
        self.episode_id: str | None = None
        self.session_id: str | None = None
        self._done = True
        self._verdict: Verdict | None = None
        self._pending_tokens = 0
        self._pending_cost = 0.0
        self._transcript: list[str] = []
        self._hold: threading.Thread | None = None
        self._hold_http: httpx.Client | None = None

    # ------------------------------------------------------------- the wire
    def _call(self, what: str, body: dict[str, Any]) -> StepResult:
        headers = {SESSION_HEADER: self.session_id} if self.session_id else {}
        try:
            response = self._http.post(f"/{what}", json=body, headers=headers)
        except httpx.TimeoutException:
            raise RemoteError(f"the env server did not answer {what} within {self.timeout_s:g} s") from None
        except httpx.HTTPError as exc:
            raise RemoteError(f"the env server at {self.url} failed {what}: {exc}; open a new "
                              "RemoteEnv") from None
        if response.status_code != 200:
            self._refused(what, response)
        if self.session_id is None:
            self.session_id = response.headers.get(SESSION_HEADER)
            self._start_hold()
        try:
            return StepResult.from_dict(response.json())
        except (ValueError, WireError) as exc:
            raise RemoteError(f"the env server sent a malformed {what} result: {exc}") from None

    def _refused(self, what: str, response: httpx.Response) -> None:
        try:
            error = decode_error_body(response.json())
        except ValueError:
            error = None
        if error is None:
            raise RemoteError(f"the env server refused {what} ({response.status_code}): "
                              f"{response.text[:300]}")
        text, kind = str(error), error.fields.get("kind")
        if error.code == Code.HELD_OUT:
            raise HeldOutError(text)
        if kind == "episode_state":
            raise EpisodeStateError(text)
        if kind == "task_not_found":
            raise TaskNotFoundError(text)
        if error.code == Code.NOT_FOUND:  # reaped or closed by the server: its episode is gone
            self.session_id = None
        raise RemoteError(f"the env server refused {what}: {text} ({error.code.value})", error.code.value)

    def _start_hold(self) -> None:
        """Hold ``GET /hold`` open on a connection of its own: the server ends the session when
        that request ends, so the session goes with this process however it goes."""
        if self.session_id is None:
            return
        if self._hold_http is not None:  # the session before (reaped by the server) is gone
            self._hold_http.close()
        hold = httpx.Client(base_url=self.url, headers={**request_headers(self.token),
                                                         SESSION_HEADER: self.session_id},
                            timeout=httpx.Timeout(None, connect=60.0), verify=tls_context())

        def held() -> None:
            with contextlib.suppress(httpx.HTTPError, RuntimeError):  # ended: closed, or the server went
                hold.get("/hold")

        self._hold_http = hold
        self._hold = threading.Thread(target=held, name="proofgym-remote-hold", daemon=True)
        self._hold.start()

    # ------------------------------------------------------------ the env
    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        super().reset(seed=seed)
        options = dict(options or {})
        task = options.pop("task", None)
        if task is not None:
            if not isinstance(task, RemoteTask):
                raise TypeError("a RemoteEnv runs the server's tasks: pass options={'task_id': ...} "
                                f"(got a {type(task).__name__})")
            options["task_id"] = task.id
        self._done, self._verdict = True, None
        self._pending_tokens, self._pending_cost = 0, 0.0
        result = self._call("reset", Reset(seed, options.get("task_id"), self.allow_heldout).to_dict())
        obs, info = result.observation, result.info
        self.episode_id = result.metadata["episode_id"]
        self.session_id = result.metadata["session_id"]
        assert self.tasks is not None
        self.current_task = self.tasks.get(info["task_id"])  # type: ignore[assignment]
        self.current_spec = TaskSpec(obs["observation"], tools=info["tools"], metadata=info["metadata"])
        self._done = False
        if self.render_mode == "ansi":
            self._transcript = [f"[task {info['task_id']}]", f"user: {obs['observation']}"]
        return obs, info

    def step(self, action: AgentAction) -> tuple[dict[str, Any], SupportsFloat, bool, bool, dict[str, Any]]:
        if self.current_task is None or self._done:
            when = "before reset()" if self.current_task is None else "after the episode ended"
            raise EpisodeStateError(f"step() called {when}; call reset() first")
        if not isinstance(action, (ToolCallAction, TurnCompleteAction)):
            raise TypeError("action must be a ToolCallAction or TurnCompleteAction, got "
                            f"{type(action).__name__}")
        step = Step(action, self._pending_tokens, self._pending_cost)
        self._pending_tokens, self._pending_cost = 0, 0.0
        result = self._call("step", step.to_dict())
        if result.terminated or result.truncated:
            self._done = True
            self._verdict = result.decoded_verdict()
        out = result.gym
        if self.render_mode == "ansi":
            self._transcript += transcript_lines(action, out)
        return out

    def charge(self, *, tokens: int = 0, cost: float = 0.0) -> None:
        if tokens < 0 or cost < 0:
            raise ConfigError("tokens and cost must be non-negative")
        # sent with the next step: the server's env keeps the budgets
        self._pending_tokens += tokens
        self._pending_cost += cost

    def render(self) -> str | None:  # type: ignore[override]
        return "\n".join(self._transcript) + "\n" if self.render_mode == "ansi" else None

    # ----------------------------------------------------------------- verify
    @property
    def episode_over(self) -> bool:
        return self._done and self.current_task is not None

    def verification_job(self, trace: Trace | list[Any]) -> VerificationJob:
        """The finished episode as a settled job: the server's verdict, returned with its last
        step (the episode's final state stays on the server, which graded it)."""
        if self.current_task is None or self.episode_id is None:
            raise EpisodeStateError("verify() needs an episode: call reset() and step() first")
        if not self._done or self._verdict is None:
            raise EpisodeStateError("a served episode is graded when it ends: step until terminated "
                                    "or truncated, then verify")
        artifact = Artifact("remote", meta={"server": self.url, "trajectory_id": self.episode_id})
        return VerificationJob(self.current_task, Trace.coerce(trace), artifact, verdict=self._verdict)

    def verify(self, trace: Trace | list[Any], **_: Any) -> Verdict:
        """The server's verdict for the episode that just ended (graded there, from what it saw;
        a pool or timeout given for a local env has nothing to do here)."""
        return self.verification_job(trace).run()

    # ------------------------------------------------------------------ close
    def __reduce__(self) -> tuple[Any, ...]:
        """A copy (pickle, ``copy``, an async vector env's worker) is a new session on the same
        server with the same settings, the bearer token included: the server's session, its
        episode and its sandbox stay with this env; the copy starts at its first ``reset``."""
        return (_reconnect, (self.url, self.token, self.allow_heldout, self.render_mode, self.timeout_s))

    def close(self) -> None:
        http = getattr(self, "_http", None)
        if http is None:
            return
        if self.session_id is not None:
            with contextlib.suppress(httpx.HTTPError):  # gone: the server ended the session already
                http.post("/close", headers={SESSION_HEADER: self.session_id}, timeout=30.0)
            self.session_id = None
        if self._hold_http is not None:
            self._hold_http.close()
            self._hold_http = None
        if self._hold is not None:
            self._hold.join(5.0)
            self._hold = None
        http.close()
        self._http = None
        super().close()


def _reconnect(url: str, token: str | None, allow_heldout: bool, render_mode: str | None,
               timeout_s: float) -> RemoteEnv:
    return RemoteEnv(url, token=token, allow_heldout=allow_heldout, render_mode=render_mode,
                     timeout_s=timeout_s)
