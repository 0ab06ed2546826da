"""``RemoteEnv``: a Gymnasium env over ``proofgym serve``, indistinguishable from the local one.

It is a :class:`~proofgym.env.UniversalVerifiableEnv` whose steps run on the server, over one
WebSocket session (OpenEnv's messages): the same seeds and task ids give the same observations
and infos as the env built locally (a reset without a task id gets a train task, unless
``allow_heldout``: the local env's draw whenever that is one), and because the server describes
its tools, limits, runtime settings and tasks (ids, content hashes, grader versions: never their
content), a run through it has the same rollout contract, and so the same trajectory ids, as a
local run. Grading is out of band: the server grades each finished episode itself, from what it
saw; the verdict comes back through
:meth:`verification_job` (a job whose "grader" fetches the server's verdict), so ``evaluate``,
the orchestrator and a ``VerifierPool`` use it unchanged.

Use it where a local env goes: ``RemoteEnv("ws://127.0.0.1:8000")``,
``proofgym eval ENV --env-url ws://...``, ``gymnasium.make_vec("proofgym.remote:Remote-v0",
num_envs=4, vectorization_mode="sync", url=...)`` (or ``"async"``: a pickled ``RemoteEnv`` is a new
session on the same server).
"""

from __future__ import annotations

import contextlib
from typing import Any, SupportsFloat
from urllib.parse import urlsplit, urlunsplit

import gymnasium
import httpx
import orjson
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from proofgym.core import (
    AgentAction,
    EpisodeStateError,
    Limits,
    TaskNotFoundError,
    TaskSpec,
    ToolCallAction,
    Trace,
    TurnCompleteAction,
)
from proofgym.env import UniversalVerifiableEnv, VerificationJob, transcript_lines
from proofgym.remote.served import (
    RemoteError,
    RemoteRuntime,
    RemoteTask,
    ServedSpecs,
    http_base,
    request_headers,
)
from proofgym.runtimes import Artifact
from proofgym.tasks import HeldOutError, SplitManifest, TaskSet
from proofgym.wire import Code, encode_action


class RemoteEnv(UniversalVerifiableEnv):
    """A served env (see the module docstring).

    Args:
        url: The server (``ws://HOST:PORT`` or ``http://HOST:PORT``).
        token: Its bearer token, if it has one.
        allow_heldout: Reset on held-out tasks (the server then burns them).
        render_mode: ``None`` or ``"ansi"``, as the local env.
        timeout_s: Seconds one call may take.
    """

    def __init__(self, url: str, *, token: str | None = None, allow_heldout: bool = False,
                 render_mode: str | None = None, timeout_s: float = 600.0) -> None:
        self.url = http_base(url)
        self.token = token
        self.allow_heldout = allow_heldout
        self.timeout_s = timeout_s
        try:
            response = httpx.get(f"{self.url}/describe", headers=request_headers(token), timeout=60.0)
        except httpx.HTTPError as exc:
            raise RemoteError(f"cannot reach the env server at {self.url}: {exc}") from None
        if response.status_code != 200:
            raise RemoteError(f"the env server at {self.url} refused /describe "
                              f"({response.status_code}): {response.text[:300]}")
        self.described = response.json()
        self.served_env_id: str = self.described["env_id"]
        self.served_env_kwargs: dict[str, Any] = self.described.get("env_kwargs", {})
        tasks = None
        if self.described.get("taskset"):
            info = self.described["taskset"]
            specs = ServedSpecs(self.url, token)
            tasks = TaskSet([RemoteTask(t, self.url, token, specs) for t in self.described["tasks"]],
                            name=info["name"], manifest=SplitManifest.from_dict(info["manifest"]))
        super().__init__(RemoteRuntime(self.described), tasks=tasks,
                         limits=Limits(**self.described["limits"]), render_mode=render_mode)
        self._pending_tokens = 0
        self.episode_id: str | None = None
        self.session_id: str | None = None
        ws_url = urlunsplit(("wss" if self.url.startswith("https") else "ws",
                             urlsplit(self.url).netloc, urlsplit(self.url).path + "/ws", "", ""))
        try:
            # entered: websockets >= 17.1 wants its connection opened as a context manager
            self._ws = connect(ws_url, additional_headers=request_headers(token), max_size=64 * 1024 * 1024,
                               open_timeout=60.0).__enter__()
        except (OSError, ConnectionClosed) as exc:
            raise RemoteError(f"cannot open a session on {ws_url}: {exc}") from None

    # ------------------------------------------------------------- the wire
    def _call(self, message: dict[str, Any]) -> dict[str, Any]:
        try:
            self._ws.send(orjson.dumps(message).decode())
            reply = orjson.loads(self._ws.recv(timeout=self.timeout_s))
        except ConnectionClosed as exc:
            raise RemoteError(f"the env server closed the session ({exc}); open a new RemoteEnv") from None
        except TimeoutError:
            raise RemoteError(f"the env server did not answer within {self.timeout_s:g} s") from None
        if reply.get("type") == "error":
            data = reply.get("data", {})
            text, code, kind = data.get("message", "error"), data.get("code", ""), data.get("kind")
            if code == Code.HELD_OUT.value:
                raise HeldOutError(text)
            if kind == "episode_state":
                raise EpisodeStateError(text)
            if kind == "task_not_found":
                raise TaskNotFoundError(text)
            raise RemoteError(f"the env server refused {message.get('type')}: {text} ({code})", code)
        return reply["data"]

    # ------------------------------------------------------------ the env
    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        gymnasium.Env.reset(self, seed=seed)
        options = dict(options or {})
        task = options.pop("task", None)
        if task is not None:
            if not isinstance(task, RemoteTask):
                raise TypeError("a RemoteEnv runs the server's tasks: pass options={'task_id': ...} "
                                f"(got a {type(task).__name__})")
            options["task_id"] = task.id
        self._clear_episode()
        data = self._call({"type": "reset", "data": {
            "seed": seed, "options": {"task_id": options.get("task_id")}, "grading": "deferred",
            "allow_heldout": self.allow_heldout}})
        obs, info = data["observation"], data["info"]
        self.episode_id = data["metadata"]["episode_id"]
        self.session_id = data["metadata"]["session_id"]
        assert self.tasks is not None
        self.current_task = self.tasks.get(info["task_id"])
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
        payload = encode_action(action)
        if self._pending_tokens:
            payload["charge"] = {"tokens": self._pending_tokens}
            self._pending_tokens = 0
        data = self._call({"type": "step", "data": payload})
        result = (data["observation"], 0.0, bool(data["terminated"]), bool(data["truncated"]), data["info"])
        if result[2] or result[3]:
            self._done = True
        if self.render_mode == "ansi":
            self._transcript += transcript_lines(action, result)
        return result

    def charge(self, *, tokens: int = 0, cost: float = 0.0) -> None:
        if tokens < 0 or cost < 0:
            raise ValueError("tokens and cost must be non-negative")
        self._pending_tokens += tokens  # sent with the next step: the server's env keeps the budget

    def verification_job(self, trace: Trace | list[Any]) -> VerificationJob:
        if self.current_task is None or self.episode_id is None:
            raise EpisodeStateError("verify() needs an episode: call reset() and step() first")
        if not self._done:
            raise EpisodeStateError("a served episode is graded when it ends: step until terminated "
                                    "or truncated, then verify")
        artifact = Artifact("remote", meta={"server": self.url, "trajectory_id": self.episode_id})
        return VerificationJob(self.current_task, Trace.coerce(trace), artifact)

    def __reduce__(self) -> tuple[Any, ...]:
        """A copy (pickle, ``copy``, an async vector env's worker) is a new session on the same
        server with the same settings, the bearer token included: the server's session, its
        episode and its sandbox stay with this env; the copy starts at its first ``reset``."""
        return (_reconnect, (self.url, self.token, self.allow_heldout, self.render_mode, self.timeout_s))

    def close(self) -> None:
        ws = getattr(self, "_ws", None)
        if ws is not None:
            with contextlib.suppress(ConnectionClosed):  # gone: the server ended the session with it
                ws.send('{"type": "close"}')
            ws.close()
            self._ws = None
        gymnasium.Env.close(self)


def _reconnect(url: str, token: str | None, allow_heldout: bool, render_mode: str | None,
               timeout_s: float) -> RemoteEnv:
    return RemoteEnv(url, token=token, allow_heldout=allow_heldout, render_mode=render_mode,
                     timeout_s=timeout_s)
