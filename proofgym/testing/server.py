"""A real OpenAI-compatible HTTP server that answers from a script, with injectable faults.

Asked for them as vLLM is (``logprobs: true``, ``return_token_ids: true``), it returns
log-probabilities and the prompt's and completion's token ids (:mod:`proofgym.testing.tokens`).

It speaks ``GET /v1/models``, ``GET /v1/models/{id}`` and ``POST /v1/chat/completions`` (tool
calls, ``usage``, ``finish_reason``, ``n`` choices, and ``stream=True`` as server-sent events with
content and tool-call deltas, as the OpenAI API sends them) over real HTTP (Starlette on
uvicorn, the server stack of ``proofgym serve``), so a policy
under test goes through the same client, sockets and JSON as against vLLM or OpenAI. A model id
other than the one served is a 404 ``model_not_found``. Use it to test an environment offline
(``proofgym serve-scripted ENV``) and as the model in tests and benchmarks.

Faults (:class:`Fault`) are chosen per *distinct request* (a hash of its messages), so they are
deterministic: ``Fault("429", rate=0.5, attempts=1)`` answers the first try of half of all requests
with HTTP 429 and the retry normally; ``attempts=None`` fails every try.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from proofgym.core import AgentAction, ToolCallAction, TurnCompleteAction
from proofgym.core.errors import ConfigError, PolicyInfrastructureError
from proofgym.testing import tokens
from proofgym.testing.scripts import ChatScript, UnknownPrompt

FAULT_KINDS = ("429", "500", "timeout", "malformed", "length")


@dataclass(frozen=True)
class Fault:
    """An injected fault.

    Attributes:
        kind: ``429`` / ``500`` (HTTP errors), ``timeout`` (the server stalls ``hang_s``),
            ``malformed`` (tool-call arguments that are not JSON), ``length`` (the reply is cut
            in half with ``finish_reason="length"``).
        rate: Fraction of distinct requests affected (chosen by hash: deterministic).
        attempts: For ``429``/``500``/``timeout``: how many tries of an affected request fail
            before it succeeds (``None``: every try).
    """

    kind: str
    rate: float = 1.0
    attempts: int | None = 1

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ConfigError(f"unknown fault {self.kind!r}; use one of {', '.join(FAULT_KINDS)}")
        if not 0.0 <= self.rate <= 1.0:
            raise ConfigError(f"fault rate must be within [0, 1], got {self.rate}")

    @classmethod
    def parse(cls, text: str) -> Fault:
        """``KIND[:RATE[:ATTEMPTS]]``, e.g. ``429:0.2:1`` or ``500:1:always``."""
        parts = text.split(":")
        try:
            rate = float(parts[1]) if len(parts) > 1 else 1.0
            attempts = (None if parts[2] in ("always", "inf") else int(parts[2])) if len(parts) > 2 else 1
        except ValueError:
            raise ConfigError(f"bad fault {text!r}; use KIND[:RATE[:ATTEMPTS|always]], "
                              "e.g. 429:0.2:1") from None
        return cls(parts[0], rate, attempts)


class ScriptedServer:
    """Serve ``script`` as an OpenAI-compatible chat model.

    Args:
        script: Decides the assistant's actions (e.g. :class:`~proofgym.testing.ReferenceScript`).
        model: The model id served.
        latency_s: Delay before every answer (a model's generation time).
        faults: Faults to inject.
        tool_call_format: ``native`` (``tool_calls``) or ``text`` (``<tool_call>{...}</tool_call>``
            in the content, as some servers leave them).
        reasoning: Add a ``reasoning_content`` field to every answer.
        hang_s: How long a ``timeout`` fault stalls.
        record_requests: Keep every request body in ``received`` (for tests that check what a
            client sent).

    Use as a context manager (``with ScriptedServer(...) as server: server.base_url``) to run it
    on a background thread, or ``run()`` to serve in the foreground.
    """

    def __init__(self, script: ChatScript, *, model: str = "scripted", host: str = "127.0.0.1",
                 port: int = 0, latency_s: float = 0.0, faults: Iterable[Fault] = (),
                 tool_call_format: str = "native", reasoning: bool = False, hang_s: float = 30.0,
                 record_requests: bool = False) -> None:
        if tool_call_format not in ("native", "text"):
            raise ConfigError("tool_call_format must be 'native' or 'text'")
        self.script, self.model, self.host, self.port = script, model, host, port
        self.latency_s, self.faults = latency_s, tuple(faults)
        self.tool_call_format, self.reasoning, self.hang_s = tool_call_format, reasoning, hang_s
        self.stats: Counter[str] = Counter()
        self.received: list[dict[str, Any]] | None = [] if record_requests else None
        #: With ``record_requests``: every response that carried tokens, as sent.
        self.sent: list[dict[str, Any]] | None = [] if record_requests else None
        self._tries: Counter[str] = Counter()
        self._ids = itertools.count()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: _Server | None = None
        self._serving: asyncio.Task[None] | None = None

    # ----------------------------------------------------------------- serving
    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/v1/models", self._models), Route("/v1/models/{model}", self._model),
                                 Route("/v1/chat/completions", self._chat, methods=["POST"])])

    def _config(self) -> uvicorn.Config:
        # a hung request (the timeout fault) must not hold a stop: 1 s of grace, then it is cut
        return uvicorn.Config(self.app(), host=self.host, port=self.port, log_level="warning",
                              access_log=False, lifespan="off", backlog=1024, timeout_graceful_shutdown=1)

    async def start_async(self) -> None:
        """Serve on the running event loop; returns once the port is open (``port`` is then the
        real one, also for port 0)."""
        sock = socket.create_server((self.host, self.port), backlog=1024)
        self.port = sock.getsockname()[1]
        self._server = _Server(self._config())
        self._serving = asyncio.create_task(self._server.serve(sockets=[sock]))
        while not self._server.started:
            if self._serving.done():
                await self._serving  # its failure, raised here
                raise PolicyInfrastructureError("the scripted server stopped as it started")
            await asyncio.sleep(0.005)

    async def stop_async(self) -> None:
        if self._server is not None and self._serving is not None:
            self._server.should_exit = True
            await self._serving
        self._server = self._serving = None

    def run(self) -> None:
        """Serve in the foreground until interrupted."""
        uvicorn.Server(self._config()).run()

    def start(self) -> ScriptedServer:
        """Serve on a background thread; returns once the port is open."""
        ready = threading.Event()
        failure: list[BaseException] = []

        def main() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self.start_async())
            except BaseException as exc:
                failure.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=main, name="proofgym-scripted-server", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            raise PolicyInfrastructureError(f"scripted server failed to start on {self.host}:{self.port}: "
                                            f"{failure[0]}")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            with contextlib.suppress(TimeoutError, RuntimeError):  # a stop never hangs the caller
                asyncio.run_coroutine_threadsafe(self.stop_async(), self._loop).result(timeout=10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
            self._thread = self._loop = None

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---------------------------------------------------------------- handlers
    async def _models(self, request: Request) -> Response:
        return _json({"object": "list", "data": [self._model_card()]})

    def _model_card(self) -> dict[str, Any]:
        return {"id": self.model, "object": "model", "created": 0, "owned_by": "proofgym-scripted"}

    async def _model(self, request: Request) -> Response:
        name = request.path_params["model"]
        if name != self.model:
            return _unknown_model(name, self.model)
        return _json(self._model_card())

    async def _chat(self, request: Request) -> Response:
        self.stats["requests"] += 1
        try:
            body = orjson.loads(await request.body())
            messages = body["messages"]
            if not isinstance(messages, list) or not messages:
                raise ConfigError("messages must be a non-empty list")
            n = 1 if body.get("n") is None else body["n"]
            if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 128:
                raise ConfigError(f"n must be an integer from 1 to 128, got {n!r}")
        except (orjson.JSONDecodeError, KeyError, ValueError, TypeError, AttributeError) as exc:
            return _error(400, f"bad request: {exc}", "invalid_request_error")
        if body.get("model") not in (None, self.model):
            return _unknown_model(str(body["model"]), self.model)
        if self.received is not None:
            self.received.append(body)
        key = hashlib.sha256(orjson.dumps(messages, option=orjson.OPT_SORT_KEYS)).hexdigest()
        self._tries[key] += 1
        for fault in self.faults:
            if fault.kind in ("429", "500", "timeout") and _hit(fault, key) and (
                    fault.attempts is None or self._tries[key] <= fault.attempts):
                self.stats[f"fault_{fault.kind}"] += 1
                if fault.kind == "429":
                    return _error(429, "rate limited (injected fault)", "rate_limit_exceeded")
                if fault.kind == "500":
                    return _error(500, "internal server error (injected fault)", "server_error")
                await asyncio.sleep(self.hang_s)
                break
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        try:
            actions = self.script.respond(messages, body.get("tools"))
        except UnknownPrompt as exc:
            return _error(400, str(exc), "invalid_request_error")
        choices = [self._message(actions, key) for _ in range(n)]
        self.stats["completions"] += n
        prompt_tokens = sum(len(str(m.get("content") or "")) for m in messages) // 4 + 1
        completion_tokens = sum(len(orjson.dumps(message)) // 4 + 1 for message, _ in choices)
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                 "total_tokens": prompt_tokens + completion_tokens}
        head = {"id": f"chatcmpl-{next(self._ids)}", "created": int(time.time()),
                "model": body.get("model", self.model)}
        if body.get("stream"):
            options = body.get("stream_options") or {}
            return self._stream(head, choices, usage if options.get("include_usage") else None)
        out: dict[str, Any] = {**head, "object": "chat.completion", "usage": usage,
                               "choices": [{"index": i, "message": message, "finish_reason": finish,
                                            "logprobs": None}
                                           for i, (message, finish) in enumerate(choices)]}
        if body.get("logprobs") or body.get("return_token_ids"):
            self._add_tokens(out, messages, body)
        return _json(out)

    def _add_tokens(self, out: dict[str, Any], messages: list[dict[str, Any]], body: dict[str, Any]) -> None:
        """What vLLM adds when asked: ``logprobs`` (``logprobs: true``) and the prompt's and each
        choice's token ids (``return_token_ids: true``), from :mod:`proofgym.testing.tokens`;
        ``usage`` then counts those tokens."""
        prompt = tokens.prompt_ids(messages)
        completions = 0
        for choice in out["choices"]:
            ids = tokens.completion_ids(choice["message"])
            completions += len(ids)
            if body.get("logprobs"):
                choice["logprobs"] = tokens.vllm_logprobs(ids, tokens.logprobs(prompt, ids))
            if body.get("return_token_ids"):
                choice["token_ids"] = ids
        if body.get("return_token_ids"):
            out["prompt_token_ids"] = prompt
        out["usage"] = {"prompt_tokens": len(prompt), "completion_tokens": completions,
                        "total_tokens": len(prompt) + completions}
        if self.sent is not None:
            self.sent.append(out)

    def _stream(self, head: dict[str, Any], choices: list[tuple[dict[str, Any], str]],
                usage: dict[str, Any] | None) -> StreamingResponse:
        """Server-sent events in the OpenAI chunk format: the role, content in pieces, each tool
        call's id and name then its arguments in pieces, the finish reason, optionally usage,
        then ``[DONE]``."""
        self.stats["streams"] += 1

        def chunk(index: int | None, delta: dict[str, Any] | None, finish: str | None = None,
                  **extra: Any) -> bytes:
            out: dict[str, Any] = {**head, "object": "chat.completion.chunk", **extra}
            out["choices"] = [] if index is None else [
                {"index": index, "delta": delta, "finish_reason": finish, "logprobs": None}]
            return b"data: " + orjson.dumps(out) + b"\n\n"

        async def events() -> Any:
            for index, (message, finish) in enumerate(choices):
                yield chunk(index, {"role": "assistant", "content": ""})
                if message.get("reasoning_content"):
                    yield chunk(index, {"reasoning_content": message["reasoning_content"]})
                for piece in _pieces(message.get("content") or ""):
                    yield chunk(index, {"content": piece})
                for j, call in enumerate(message.get("tool_calls") or []):
                    yield chunk(index, {"tool_calls": [{"index": j, "id": call["id"], "type": "function",
                                                        "function": {"name": call["function"]["name"],
                                                                     "arguments": ""}}]})
                    for piece in _pieces(call["function"]["arguments"]):
                        yield chunk(index, {"tool_calls": [{"index": j, "function": {"arguments": piece}}]})
                yield chunk(index, {}, finish)
            if usage is not None:
                yield chunk(None, None, usage=usage)
            yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache"})

    def _message(self, actions: Sequence[AgentAction], key: str) -> tuple[dict[str, Any], str]:
        calls = [a for a in actions if isinstance(a, ToolCallAction)]
        text = "".join(a.message for a in actions if isinstance(a, TurnCompleteAction))
        malformed = any(f.kind == "malformed" and _hit(f, key) for f in self.faults)
        cut = any(f.kind == "length" and _hit(f, key) for f in self.faults)
        message: dict[str, Any] = {"role": "assistant", "content": None}
        finish = "stop"
        if calls:
            rendered = []
            for i, call in enumerate(calls):
                arguments = orjson.dumps(call.tool_input).decode()
                if malformed:
                    arguments = arguments[:-1] + ",}"  # a trailing comma: not JSON
                    self.stats["fault_malformed"] += 1
                rendered.append((f"call_{key[:8]}_{i}", call.tool_name, arguments))
            if self.tool_call_format == "native":
                message["tool_calls"] = [{"id": cid, "type": "function",
                                          "function": {"name": name, "arguments": args}}
                                         for cid, name, args in rendered]
                finish = "tool_calls"
            else:
                text += "".join(f'<tool_call>{{"name": {orjson.dumps(name).decode()}, '
                                f'"arguments": {args}}}</tool_call>' for _, name, args in rendered)
        if cut:
            self.stats["fault_length"] += 1
            finish = "length"
            text = text[: len(text) // 2]
            for call in message.get("tool_calls", []):
                arguments = call["function"]["arguments"]
                call["function"]["arguments"] = arguments[: len(arguments) // 2]
        if text or not calls:
            message["content"] = text
        if self.reasoning:
            message["reasoning_content"] = f"Thinking about step {len(key) % 7}: following the plan."
        return message, finish


def _hit(fault: Fault, key: str) -> bool:
    """Deterministically pick ``fault.rate`` of the distinct requests (by their hash)."""
    if fault.rate >= 1.0:
        return True
    salted = hashlib.blake2b(f"{fault.kind}:{key}".encode(), digest_size=4).digest()
    return int.from_bytes(salted, "big") / 0xFFFFFFFF < fault.rate


def _pieces(text: str, size: int = 16) -> list[str]:
    """``text`` in the small pieces a streaming server sends."""
    return [text[i:i + size] for i in range(0, len(text), size)]


def _unknown_model(name: str, served: str) -> Response:
    return _json({"error": {"message": f"The model {name!r} does not exist; this server serves "
                            f"{served!r}", "type": "invalid_request_error",
                            "code": "model_not_found", "param": "model"}}, 404)


def _json(payload: Mapping[str, Any], status: int = 200) -> Response:
    return Response(orjson.dumps(payload), status, media_type="application/json")


def _error(status: int, message: str, code: str) -> Response:
    return _json({"error": {"message": message, "type": code, "code": code, "param": None}}, status)


class _Server(uvicorn.Server):
    """uvicorn's server, minus its signal handlers: the scripted server runs inside a test or a
    benchmark, whose own process owns SIGINT and SIGTERM."""

    @contextlib.contextmanager
    def capture_signals(self) -> Any:
        yield
