"""The wire: the typed messages ``proofgym serve`` and its clients speak, one codec under both.

The server (:mod:`proofgym.serve`) decodes what clients send and encodes what it answers with
these types; the client (:mod:`proofgym.remote`) does the reverse with the same types, so a field
is named, checked and defaulted in one place.

WebSocket frames are OpenEnv's (``openenv.core.env_server.types``): the client sends
``{"type": "reset", "data": {...}}``, ``{"type": "step", "data": ACTION}``, ``{"type": "state"}`` or
``{"type": "close"}``; the server answers ``{"type": "observation", "data": RESULT}``,
``{"type": "state", "data": {...}}`` or ``{"type": "error", "data": {"message", "code"}}`` with
OpenEnv's error codes (:class:`Code`). HTTP bodies are the same ``data`` payloads; an HTTP error
is ``{"error": {"message", "code", ...}}``.

``RESULT`` (:class:`StepResult`) is what OpenEnv's ``GenericEnvClient`` reads (``observation``,
``reward``, ``done``) plus the rest of Gymnasium's 5-tuple (``terminated``, ``truncated``, ``info``)
and ``metadata``. ``reward`` is OpenEnv's: ``0.0`` during an episode; on the step that ends it, the
verdict's reward when the episode was graded in line (``None`` when grading failed: an unscored
episode is never a 0), and the verdict itself under ``verdict``. The Gymnasium reward of a proofgym
step is always ``0.0``.

An ACTION is a proofgym action record: ``{"tool_name": ..., "tool_input": {...}}`` (a tool call)
or ``{"message": ...}`` (the end of the turn), optionally with ``"kind"`` as in
:meth:`~proofgym.core.ToolCallAction.to_dict`, and ``"charge"`` (what the policy spent on it).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

import orjson

from proofgym.core import AgentAction, ToolCallAction, TurnCompleteAction, Verdict
from proofgym.core.errors import CapacityError as CapacityError
from proofgym.core.errors import Code as Code
from proofgym.core.errors import ServeError as ServeError
from proofgym.core.errors import WireError as WireError

#: The HTTP header naming an HTTP session (NeMo-Gym-style ``/reset`` and ``/step``).
SESSION_HEADER = "X-Proofgym-Session"


#: HTTP status for each code (WebSocket errors carry the code only).
HTTP_STATUS = {Code.INVALID_JSON: 400, Code.UNKNOWN_TYPE: 400, Code.VALIDATION_ERROR: 422,
               Code.EXECUTION_ERROR: 409, Code.CAPACITY_REACHED: 503, Code.FACTORY_ERROR: 500,
               Code.SESSION_ERROR: 500, Code.HELD_OUT: 403, Code.UNAUTHORIZED: 401,
               Code.NOT_FOUND: 404, Code.DRAINING: 503}


def decode_error(payload: Any) -> ServeError:
    """The refusal an error frame's ``data`` (or an HTTP error body's ``error``) carries."""
    if not isinstance(payload, dict) or not isinstance(payload.get("message"), str):
        raise WireError("an error payload is {'message': str, 'code': str}, got "
                        f"{str(payload)[:200]!r}")
    try:
        code = Code(payload.get("code"))
    except ValueError:
        code = Code.EXECUTION_ERROR  # a code this client does not know: still the server's refusal
    fields = {k: v for k, v in payload.items() if k not in ("message", "code")}
    return ServeError(code, payload["message"], **fields)


def dumps(message: Any) -> str:
    return orjson.dumps(message, default=repr, option=orjson.OPT_SERIALIZE_NUMPY).decode()


def loads(text: str | bytes) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise WireError(f"invalid JSON: {exc}", Code.INVALID_JSON) from None


# ------------------------------------------------------------------ actions
def decode_action(data: Any) -> AgentAction:
    """The action in a step payload, or a ``VALIDATION_ERROR`` saying what a valid one is."""
    if isinstance(data, dict) and isinstance(data.get("action"), dict):
        data = data["action"]  # HTTP's {"action": {...}}, as OpenEnv's StepRequest
    if isinstance(data, dict):
        kind = data.get("kind")
        if (kind in (None, "tool_call")) and isinstance(data.get("tool_name"), str):
            return ToolCallAction(data["tool_name"], data.get("tool_input", {}), data.get("call_id"))
        if (kind in (None, "turn_complete")) and isinstance(data.get("message"), str):
            return TurnCompleteAction(data["message"])
    raise WireError("a step's action must be {'tool_name': str, 'tool_input': {...}} (a tool call) or "
                    f"{{'message': str}} (the end of the turn); got {str(data)[:200]!r}")


def encode_action(action: AgentAction) -> dict[str, Any]:
    """The wire form of ``action`` (the inverse of :func:`decode_action`)."""
    if isinstance(action, ToolCallAction):
        return {"tool_name": action.tool_name, "tool_input": action.tool_input, "call_id": action.call_id}
    return {"message": action.message}


# ----------------------------------------------------------------- messages
Grading = Literal["inline", "deferred"]
#: Where a served episode's verdict goes by default: with the step that ends it (a grading mode of
#: the wire, not a verifier backend).
WITH_LAST_STEP = "inline"


@dataclass(frozen=True)
class Reset:
    """A reset: the seed, the task (``None``: the server draws one it may serve), whether a
    held-out task may be served (and so burned), and where the verdict goes: ``inline`` (with the
    step that ends the episode) or ``deferred`` (``GET /verdicts/ID``)."""

    seed: int | None = None
    task_id: str | None = None
    allow_heldout: bool = False
    grading: Grading = WITH_LAST_STEP  # type: ignore[assignment]
    #: The client's policy version (a trainer's step), recorded on the served episode.
    policy_version: int | str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {"seed": self.seed, "options": {"task_id": self.task_id}, "grading": self.grading,
               "allow_heldout": self.allow_heldout}
        if self.policy_version is not None:
            out["policy_version"] = self.policy_version
        return out

    @classmethod
    def from_dict(cls, data: Any) -> Reset:
        if not isinstance(data, dict):  # OpenEnv's answer; never a default reset
            raise WireError(f"a reset's data is an object such as {{'seed': 0}}, not {type(data).__name__}")
        seed = data.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise WireError(f"seed must be a non-negative integer, got {seed!r}")
        options = data.get("options") or {}
        if not isinstance(options, dict):
            raise WireError("options must be an object")
        if "task" in options:
            raise WireError("a served env picks tasks by id: use options={'task_id': ...} (GET /tasks "
                            "lists them)")
        task_id = options.get("task_id", data.get("task_id"))
        if task_id is not None and not isinstance(task_id, str):
            raise WireError(f"task_id must be a string, got {task_id!r}")
        flags = [f.get("allow_heldout") for f in (data, options) if f.get("allow_heldout") is not None]
        if any(not isinstance(flag, bool) for flag in flags):
            raise WireError("allow_heldout must be true or false")
        grading = data.get("grading", WITH_LAST_STEP)
        if grading not in ("inline", "deferred"):
            raise WireError("grading must be 'inline' (the verdict comes with the last step) or "
                            "'deferred' (fetch it from /verdicts/ID)")
        version = data.get("policy_version")
        if version is not None and (isinstance(version, bool) or not isinstance(version, (int, str))):
            raise WireError("policy_version must be the trainer's policy version (a training step), "
                            f"got {version!r}")
        return cls(seed, task_id, any(flags), grading, version)


@dataclass(frozen=True)
class Step:
    """A step: the action, and what the policy spent producing it (the server's env keeps the
    token and cost budgets)."""

    action: AgentAction
    tokens: int = 0
    cost: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        out = encode_action(self.action)
        if self.tokens or self.cost:
            out["charge"] = {"tokens": self.tokens, **({"cost": self.cost} if self.cost else {})}
        return out

    @classmethod
    def from_dict(cls, data: Any) -> Step:
        action = decode_action(data)
        charge = data.get("charge") if isinstance(data, dict) else None
        if not isinstance(charge, dict):
            return cls(action)
        try:
            tokens, cost = int(charge.get("tokens", 0)), float(charge.get("cost", 0.0))
        except (TypeError, ValueError) as exc:
            raise WireError(f"bad charge {charge!r}: {exc}") from None
        if tokens < 0 or cost < 0:
            raise WireError(f"bad charge {charge!r}: tokens and cost must be non-negative")
        return cls(action, tokens, cost)


@dataclass(frozen=True)
class StepResult:
    """A reset's or step's RESULT (see the module docstring); ``verdict`` is the public verdict
    (:func:`public_verdict`) on the step that ends an inline-graded episode."""

    observation: dict[str, Any]
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    verdict: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        reward: float | None = 0.0
        if self.verdict is not None:
            reward = self.verdict["reward"] if self.verdict.get("status") == "scored" else None
        out = {"observation": self.observation, "reward": reward,
               "done": bool(self.terminated or self.truncated), "terminated": bool(self.terminated),
               "truncated": bool(self.truncated), "info": self.info, "metadata": self.metadata}
        if self.verdict is not None:
            out["verdict"] = self.verdict
        return out

    @classmethod
    def from_dict(cls, data: Any) -> StepResult:
        got = _fields("a step result", data, {"observation": dict, "terminated": bool, "truncated": bool,
                                               "info": dict, "metadata": dict})
        verdict = data.get("verdict")
        if verdict is not None and not isinstance(verdict, dict):
            raise WireError(f"a step result's verdict is an object or absent, got {type(verdict).__name__}")
        return cls(**got, verdict=verdict)

    @property
    def gym(self) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        """Gymnasium's 5-tuple (a proofgym step's reward is always ``0.0``)."""
        return self.observation, 0.0, self.terminated, self.truncated, self.info

    def decoded_verdict(self) -> Verdict | None:
        return None if self.verdict is None else Verdict.from_dict(self.verdict)


def _fields(what: str, data: Any, kinds: dict[str, type | tuple[type, ...]]) -> dict[str, Any]:
    """``data``'s fields named in ``kinds``, each checked, or a WireError naming every bad one."""
    if not isinstance(data, dict):
        raise WireError(f"{what} is an object, got {type(data).__name__}")
    wrong = [name for name, kind in kinds.items() if not isinstance(data.get(name), kind)]
    if wrong:
        raise WireError(f"{what} lacks or mistypes {', '.join(wrong)}: {str(data)[:200]!r}")
    return {name: data[name] for name in kinds}


@dataclass(frozen=True)
class ServedTask:
    """A served task as the server describes it: id, content hash, grader (class and version),
    whether it is multi-turn, its rubric's description. Never its content."""

    id: str
    content_hash: str
    grader_type: str
    verifier_version: str
    multi_turn: bool = False
    rubric: Any = None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "content_hash": self.content_hash, "grader_type": self.grader_type,
                "verifier_version": self.verifier_version, "multi_turn": self.multi_turn,
                "rubric": self.rubric}

    @classmethod
    def from_dict(cls, data: Any) -> ServedTask:
        got = _fields("a served task", data, {"id": str, "content_hash": str, "grader_type": str,
                                               "verifier_version": str})
        return cls(**got, multi_turn=bool(data.get("multi_turn", False)), rubric=data.get("rubric"))


@dataclass(frozen=True)
class Described:
    """``GET /describe``: what a client needs to stand in for the served env (the same rollout
    contract as the env built locally): its id and arguments, tools, runtime settings, limits,
    render modes, and its task set (name, content hash, split manifest) with its tasks."""

    env_id: str
    env_kwargs: dict[str, Any]
    proofgym_version: str
    tools: list[dict[str, Any]]
    runtime_config: dict[str, Any]
    limits: dict[str, Any]
    render_modes: list[str] = field(default_factory=list)
    taskset: dict[str, Any] | None = None
    tasks: list[ServedTask] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"env_id": self.env_id, "env_kwargs": self.env_kwargs,
                "proofgym_version": self.proofgym_version, "tools": self.tools,
                "runtime_config": self.runtime_config, "limits": self.limits,
                "render_modes": self.render_modes, "taskset": self.taskset,
                "tasks": [t.to_dict() for t in self.tasks]}

    @classmethod
    def from_dict(cls, data: Any) -> Described:
        got = _fields("a /describe answer", data, {
            "env_id": str, "env_kwargs": dict, "proofgym_version": str, "tools": list,
            "runtime_config": dict, "limits": dict, "taskset": (dict, type(None)), "tasks": list})
        if got["taskset"] is not None:
            _fields("a /describe answer's taskset", got["taskset"], {"name": str, "manifest": dict})
        tasks = [ServedTask.from_dict(t) for t in got.pop("tasks")]
        return cls(**got, render_modes=list(data.get("render_modes") or []), tasks=tasks)


def public_verdict(verdict: Verdict, *, detail: bool = False) -> dict[str, Any]:
    """A verdict as the server sends it. The grade (reward, status, components, metrics, gates,
    grader) goes out; the graders' words (``reason``, ``error``, ``errors``), which may quote
    hidden tests or expected answers, only with ``detail`` (``proofgym serve --verdict-detail``)."""
    if not detail:
        withheld = "withheld by the server (proofgym serve --verdict-detail sends it)"
        verdict = replace(verdict, reason=None,
                          error=None if verdict.error is None else f"grading failed; detail {withheld}",
                          errors={name: "failed" for name in verdict.errors})
    return verdict.to_dict()


# ------------------------------------------------------------------- frames
#: The fields each client frame may carry, as OpenEnv's message models allow them (``WSResetMessage``,
#: ``WSStepMessage``, ``WSStateMessage``, ``WSCloseMessage``: extra fields forbidden).
_FRAME_FIELDS = {"reset": {"type", "data"}, "step": {"type", "data"}, "state": {"type"}, "close": {"type"}}


def parse_frame(text: str) -> tuple[str, Any]:
    """A client's WebSocket text frame as ``(type, data)``, or the error OpenEnv's server answers:
    ``INVALID_JSON`` for text that is not JSON, ``UNKNOWN_TYPE`` for another type, and
    ``VALIDATION_ERROR`` for a frame that is not an object, has fields its type does not take, or
    whose ``data`` is not an object (a reset's may be left out)."""
    message = loads(text)
    if not isinstance(message, dict):
        raise WireError(f"a frame is a JSON object, not a {type(message).__name__}")
    kind = message.get("type")
    if not isinstance(kind, str) or kind not in _FRAME_FIELDS:
        raise WireError(f"unknown message type {kind!r}; send reset, step, state or close", Code.UNKNOWN_TYPE)
    extra = sorted(set(message) - _FRAME_FIELDS[kind])
    if extra:
        raise WireError(f"a {kind} frame takes no field {extra[0]!r} "
                        f"(its fields: {sorted(_FRAME_FIELDS[kind])})")
    if kind == "step" and "data" not in message:
        raise WireError("a step frame needs data: the action")
    data = message.get("data", {})
    if kind in ("reset", "step") and not isinstance(data, dict):
        raise WireError(f"a {kind} frame's data is an object, not "
                        f"{type(data).__name__ if data is not None else 'null'}")
    return kind, data


def error_frame(error: ServeError) -> dict[str, Any]:
    return {"type": "error", "data": error.payload()}


def error_body(error: ServeError) -> dict[str, Any]:
    """An HTTP error response's body."""
    return {"error": error.payload()}


def decode_error_body(body: Any) -> ServeError | None:
    """The server's refusal in an HTTP error body, or ``None`` when the body is not one (a proxy's
    page, say)."""
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        try:
            return decode_error(body["error"])
        except WireError:
            return None
    return None
