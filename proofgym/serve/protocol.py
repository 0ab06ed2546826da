"""The wire format of ``proofgym serve``: OpenEnv's message shapes, proofgym's payloads.

WebSocket frames are OpenEnv's (``openenv.core.env_server.types``): the client sends
``{"type": "reset", "data": {...}}``, ``{"type": "step", "data": ACTION}``, ``{"type": "state"}`` or
``{"type": "close"}``; the server answers ``{"type": "observation", "data": RESULT}``,
``{"type": "state", "data": {...}}`` or ``{"type": "error", "data": {"message", "code"}}`` with
OpenEnv's error codes (:class:`Code`). HTTP bodies are the same ``data`` payloads.

``RESULT`` is what OpenEnv's ``GenericEnvClient`` reads (``observation``, ``reward``, ``done``)
plus the rest of Gymnasium's 5-tuple (``terminated``, ``truncated``, ``info``) and ``metadata``.
``reward`` is OpenEnv's: ``0.0`` during an episode; on the step that ends it, the verdict's reward
when the episode was graded in line (``None`` when grading failed: an unscored episode is never
a 0). The Gymnasium reward of a proofgym step is always ``0.0``; :class:`~proofgym.remote.RemoteEnv`
returns that and gets verdicts out of band.

An ACTION is a proofgym action record: ``{"tool_name": ..., "tool_input": {...}}`` (a tool call)
or ``{"message": ...}`` (the end of the turn), optionally with ``"kind"`` as in
:meth:`~proofgym.core.ToolCallAction.to_dict`.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import replace
from typing import Any

import orjson

from proofgym.core import (
    AgentAction,
    EpisodeStateError,
    TaskNotFoundError,
    ToolCallAction,
    TurnCompleteAction,
    Verdict,
)
from proofgym.core.errors import CapacityError as CapacityError
from proofgym.core.errors import Code as Code
from proofgym.core.errors import ServeError as ServeError
from proofgym.tasks import HeldOutError

log = logging.getLogger("proofgym.serve")

#: The HTTP header naming an HTTP session (NeMo-Gym-style ``/reset`` and ``/step``).
SESSION_HEADER = "X-Proofgym-Session"


#: HTTP status for each code (WebSocket errors carry the code only).
HTTP_STATUS = {Code.INVALID_JSON: 400, Code.UNKNOWN_TYPE: 400, Code.VALIDATION_ERROR: 422,
               Code.EXECUTION_ERROR: 409, Code.CAPACITY_REACHED: 503, Code.FACTORY_ERROR: 500,
               Code.SESSION_ERROR: 500, Code.HELD_OUT: 403, Code.UNAUTHORIZED: 401,
               Code.NOT_FOUND: 404, Code.DRAINING: 503}


#: Errors whose text is written for the agent's operator: sent as they are. Any other exception
#: raised inside an env may quote hidden task data (a grader's path, an expected answer), so the
#: client only gets a reference to the server's log.
_PUBLIC = (EpisodeStateError, TaskNotFoundError)


def public_error(exc: BaseException, during: str) -> ServeError:
    """What the client is told about ``exc`` raised while ``during``."""
    if isinstance(exc, ServeError):
        return exc
    if isinstance(exc, HeldOutError):  # a --split train server asked for another split's task
        return ServeError(Code.HELD_OUT, str(exc))
    if isinstance(exc, _PUBLIC):
        kind = "episode_state" if isinstance(exc, EpisodeStateError) else "task_not_found"
        return ServeError(Code.EXECUTION_ERROR, f"{during} failed: {exc}", kind=kind)
    ref = uuid.uuid4().hex[:12]
    log.error("%s failed (ref %s)", during, ref, exc_info=exc)
    return ServeError(Code.EXECUTION_ERROR,
                      f"{during} failed inside the environment ({type(exc).__name__}); the details "
                      f"stay on the server (its log, ref {ref})", ref=ref)


def parse_action(data: Any) -> AgentAction:
    """The action in a step payload, or a ``VALIDATION_ERROR`` saying what a valid one is."""
    if isinstance(data, dict) and isinstance(data.get("action"), dict):
        data = data["action"]  # HTTP's {"action": {...}}, as OpenEnv's StepRequest
    if isinstance(data, dict):
        kind = data.get("kind")
        if (kind in (None, "tool_call")) and isinstance(data.get("tool_name"), str):
            return ToolCallAction(data["tool_name"], data.get("tool_input", {}), data.get("call_id"))
        if (kind in (None, "turn_complete")) and isinstance(data.get("message"), str):
            return TurnCompleteAction(data["message"])
    raise ServeError(Code.VALIDATION_ERROR,
                     "a step's action must be {'tool_name': str, 'tool_input': {...}} (a tool call) or "
                     f"{{'message': str}} (the end of the turn); got {str(data)[:200]!r}")


def action_payload(action: AgentAction) -> dict[str, Any]:
    """The wire form of ``action`` (the inverse of :func:`parse_action`)."""
    if isinstance(action, ToolCallAction):
        return {"tool_name": action.tool_name, "tool_input": action.tool_input, "call_id": action.call_id}
    return {"message": action.message}


def step_payload(obs: dict[str, Any], terminated: bool, truncated: bool, info: dict[str, Any],
                 metadata: dict[str, Any], verdict: dict[str, Any] | None = None) -> dict[str, Any]:
    """A reset's or step's RESULT (see the module docstring)."""
    reward: float | None = 0.0
    if verdict is not None:
        reward = verdict["reward"] if verdict.get("status") == "scored" else None
    out = {"observation": obs, "reward": reward, "done": bool(terminated or truncated),
           "terminated": bool(terminated), "truncated": bool(truncated), "info": info,
           "metadata": metadata}
    if verdict is not None:
        out["verdict"] = verdict
    return out


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


def dumps(message: dict[str, Any]) -> str:
    return orjson.dumps(message, default=repr, option=orjson.OPT_SERIALIZE_NUMPY).decode()


def loads(text: str | bytes) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise ServeError(Code.INVALID_JSON, f"invalid JSON: {exc}") from None


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
        raise ServeError(Code.VALIDATION_ERROR, f"a frame is a JSON object, not a {type(message).__name__}")
    kind = message.get("type")
    if not isinstance(kind, str) or kind not in _FRAME_FIELDS:
        raise ServeError(Code.UNKNOWN_TYPE, f"unknown message type {kind!r}; send reset, step, state "
                         "or close")
    extra = sorted(set(message) - _FRAME_FIELDS[kind])
    if extra:
        raise ServeError(Code.VALIDATION_ERROR, f"a {kind} frame takes no field {extra[0]!r} "
                         f"(its fields: {sorted(_FRAME_FIELDS[kind])})")
    if kind == "step" and "data" not in message:
        raise ServeError(Code.VALIDATION_ERROR, "a step frame needs data: the action")
    data = message.get("data", {})
    if kind in ("reset", "step") and not isinstance(data, dict):
        raise ServeError(Code.VALIDATION_ERROR, f"a {kind} frame's data is an object, not "
                         f"{type(data).__name__ if data is not None else 'null'}")
    return kind, data


def error_frame(error: ServeError) -> dict[str, Any]:
    return {"type": "error", "data": error.payload()}
