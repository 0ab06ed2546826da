"""The ASGI app of ``proofgym serve`` (Starlette): routes, authentication, error mapping.

* ``WS /ws``: one session per connection, OpenEnv's messages (:mod:`proofgym.wire`).
  The session, and its env's sandbox, ends with the connection, however the connection ends. A
  malformed frame gets OpenEnv's error frame (a binary one ends the session, as OpenEnv's does).
* HTTP, NeMo-Gym style: ``POST /reset`` (opens a session when no ``X-Proofgym-Session`` header
  names one; the response carries the id in that header and in ``metadata.session_id``; a refused
  reset closes the session it opened, whose id the client never got),
  ``POST /step``, ``GET /state``, ``POST /close``, with the session in the header; ``GET /hold``,
  held open by a client while it lives, ties the session to it (the session ends with the request).
* ``GET /health``; ``GET /tasks`` and ``GET /splits`` (ids, splits, content hashes: no task
  content); ``GET /prompts`` (each task's spec as the agent is shown it); ``GET /describe``
  (what :class:`~proofgym.remote.RemoteEnv` needs to stand in for the env); OpenEnv's
  ``GET /schema`` and ``GET /metadata``;
  ``GET /verdicts/{trajectory_id}`` (``?wait=SECONDS``, ``?version=V``).
* The episode tier (:mod:`proofgym.serve.episodes`) under ``/episodes``.
* With a token (required when bound beyond loopback), every route but ``/health`` needs
  ``Authorization: Bearer TOKEN``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from proofgym.serve.describe import (
    describe_env,
    metadata_payload,
    prompts_payload,
    schema_payload,
    splits_payload,
    tasks_payload,
)
from proofgym.serve.protocol import public_error
from proofgym.serve.sessions import SessionManager
from proofgym.wire import (
    HTTP_STATUS,
    SESSION_HEADER,
    Code,
    ServeError,
    dumps,
    error_body,
    error_frame,
    loads,
    parse_frame,
)


def _json(payload: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(dumps(payload), status, headers=headers, media_type="application/json")


def _error(error: ServeError) -> Response:
    headers = {"Retry-After": "1"} if error.code in (Code.CAPACITY_REACHED, Code.DRAINING) else None
    return _json(error_body(error), HTTP_STATUS.get(error.code, 500), headers)


async def _disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


def build_app(manager: SessionManager, *, token: str | None = None,
              extra_routes: list[Any] | None = None,
              on_shutdown: list[Any] | None = None) -> Starlette:
    """The server's app over ``manager``; ``token``: the bearer token every route but
    ``/health`` requires (``None``: none, for loopback only)."""

    def authorized(headers: Any) -> bool:
        if token is None:
            return True
        given = headers.get("authorization", "")
        return hmac.compare_digest(given.encode(), f"Bearer {token}".encode())

    def guarded(handler: Any) -> Any:
        async def endpoint(request: Request) -> Response:
            if not authorized(request.headers):
                return _error(ServeError(Code.UNAUTHORIZED, "missing or wrong bearer token: send "
                                         "'Authorization: Bearer TOKEN' (proofgym serve --token)"))
            try:
                return await handler(request)
            except ServeError as exc:
                return _error(exc)
            except Exception as exc:
                return _error(public_error(exc, request.url.path))
        return endpoint

    async def health(request: Request) -> Response:
        return _json(manager.health())

    async def body(request: Request) -> Any:
        raw = await request.body()
        return loads(raw) if raw.strip() else {}

    async def http_call(request: Request, what: str) -> Response:
        session_id = request.headers.get(SESSION_HEADER)
        data = await body(request) if request.method == "POST" else {}
        opened = session_id is None and what == "reset"
        session = await manager.open("http") if opened else manager.get(session_id)
        try:
            result = await session.run(what, data)
        except Exception as exc:
            if opened:  # its id never reaches the client: a refused reset holds no session
                await manager.close(session)
            raise public_error(exc, what) from None
        return _json(result, headers={SESSION_HEADER: session.id})

    async def reset(request: Request) -> Response:
        return await http_call(request, "reset")

    async def step(request: Request) -> Response:
        return await http_call(request, "step")

    async def state(request: Request) -> Response:
        return await http_call(request, "state")

    async def open_session(request: Request) -> Response:
        session = await manager.open("http")
        return _json({"session_id": session.id}, headers={SESSION_HEADER: session.id})

    async def hold(request: Request) -> Response:
        """Held open by a client (:class:`~proofgym.remote.RemoteEnv`) for as long as it lives:
        when the request ends (the client closed, crashed or was killed), so does the session,
        as a WebSocket session ends with its connection. Answered once the session is closed."""
        session = manager.get(request.headers.get(SESSION_HEADER))
        gone = asyncio.ensure_future(_disconnected(request))
        try:
            while not session.closed and not gone.done():
                await asyncio.wait([gone], timeout=0.2)
        finally:
            gone.cancel()
        if not session.closed:
            await manager.close(session)
        return Response(status_code=204)

    async def close(request: Request) -> Response:
        session = manager.get(request.headers.get(SESSION_HEADER))
        await manager.close(session)
        return _json({"closed": session.id})

    async def tasks(request: Request) -> Response:
        return _json(tasks_payload(manager.source))

    async def splits(request: Request) -> Response:
        return _json(splits_payload(manager.source))

    async def schema(request: Request) -> Response:
        return _json(schema_payload(manager.source))

    async def metadata(request: Request) -> Response:
        return _json(metadata_payload(manager.source))

    async def prompts(request: Request) -> Response:
        return _json(prompts_payload(manager.source))

    async def describe(request: Request) -> Response:
        return _json(describe_env(manager.source))

    async def verdict(request: Request) -> Response:
        trajectory_id = request.path_params["trajectory_id"]
        record = manager.verdicts.get(trajectory_id, request.query_params.get("version"))
        if record is None:
            raise ServeError(Code.NOT_FOUND, f"no verdict for {trajectory_id!r} (not an episode of this "
                             "server, or a verifier version it did not grade with)")
        try:
            wait = float(request.query_params.get("wait", "0"))
        except ValueError:
            raise ServeError(Code.VALIDATION_ERROR, "wait must be a number of seconds") from None
        if wait > 0:
            await record.wait(min(wait, 300.0))
        return _json(record.to_dict())

    async def websocket(ws: WebSocket) -> None:
        await ws.accept()
        if not authorized(ws.headers):
            await ws.send_text(dumps(error_frame(ServeError(
                Code.UNAUTHORIZED, "missing or wrong bearer token: send 'Authorization: Bearer TOKEN'"))))
            await ws.close(code=1008)
            return
        try:
            session = await manager.open("ws")
        except ServeError as exc:
            await ws.send_text(dumps(error_frame(exc)))
            await ws.close(code=1013 if exc.code == Code.CAPACITY_REACHED else 1011)
            return
        try:
            while True:
                received = await ws.receive()
                if received["type"] == "websocket.disconnect":
                    break
                if received.get("text") is None:
                    # OpenEnv's server answers a binary frame with SESSION_ERROR and ends the session
                    await ws.send_text(dumps(error_frame(ServeError(
                        Code.SESSION_ERROR, "binary frames are not part of the protocol: send each "
                        "message as a JSON text frame; the session is closed"))))
                    await ws.close(code=1003)  # 1003: a data type the endpoint does not accept
                    break
                try:
                    kind, data = parse_frame(received["text"])
                    if kind == "close":
                        break
                    try:
                        result = await session.run(kind, data)
                    except ServeError:
                        raise
                    except Exception as exc:
                        raise public_error(exc, kind) from None
                    frame = {"type": "state" if kind == "state" else "observation", "data": result}
                except ServeError as exc:
                    frame = error_frame(exc)
                await ws.send_text(dumps(frame))
        except WebSocketDisconnect:
            pass  # the client went away (closed, crashed, killed): its session ends below
        finally:
            await manager.close(session)
            with contextlib.suppress(RuntimeError, WebSocketDisconnect):
                await ws.close()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        manager.start()
        try:
            yield
        finally:
            for hook in on_shutdown or []:
                await hook()
            await manager.shutdown()

    routes = [
        Route("/health", health),
        Route("/sessions", guarded(open_session), methods=["POST"]),
        Route("/reset", guarded(reset), methods=["POST"]),
        Route("/step", guarded(step), methods=["POST"]),
        Route("/state", guarded(state), methods=["GET"]),
        Route("/close", guarded(close), methods=["POST"]),
        Route("/hold", guarded(hold), methods=["GET"]),
        Route("/tasks", guarded(tasks)),
        Route("/splits", guarded(splits)),
        Route("/describe", guarded(describe)),
        Route("/prompts", guarded(prompts)),
        Route("/schema", guarded(schema)),
        Route("/metadata", guarded(metadata)),
        Route("/verdicts/{trajectory_id:path}", guarded(verdict)),
        WebSocketRoute("/ws", websocket),
        *[Route(path, guarded(fn), methods=methods) for path, fn, methods in (extra_routes or [])],
    ]
    return Starlette(routes=routes, lifespan=lifespan)
