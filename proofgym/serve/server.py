"""Running the server: uvicorn over the app, loopback by default, a drain on SIGTERM.

Binding beyond loopback needs a bearer token (``token=``): an env server runs agent code in
sandboxes on this host, and an open port would hand that to anyone who can reach it. On the
first SIGTERM (or Ctrl-C) the server drains (:meth:`SessionManager.drain`): no new sessions,
calls in flight finish, pending grades land, every session's env is closed; a second Ctrl-C
stops at once.
"""

from __future__ import annotations

import asyncio
import ipaddress
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import uvicorn

from proofgym.core import ConfigError
from proofgym.core.defaults import DEFAULTS
from proofgym.rollout.recording import Recording
from proofgym.serve.app import build_app
from proofgym.serve.episodes import EpisodeTier
from proofgym.serve.session import SERVED_POLICY, EnvSource
from proofgym.serve.sessions import SessionManager
from proofgym.serve.verdicts import VerdictStore
from proofgym.verify.pool import VerifierPool


@dataclass
class ServeConfig:
    """Everything ``proofgym serve`` is started with."""

    env_id: str
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    host: str = "127.0.0.1"
    port: int = 8000
    token: str | None = None
    max_sessions: int = 256
    idle_timeout_s: float = 600.0
    drain_s: float = 30.0
    threads: int = 32
    verifier: str = field(default_factory=DEFAULTS.verifier_backend)
    verdict_detail: bool = False
    split: str | None = None
    splits: Path | None = None
    #: Write every graded episode into this new run directory (``proofgym serve --record DIR``).
    record: Path | None = None

    def check(self) -> None:
        if not is_loopback(self.host) and not self.token:
            raise ConfigError(f"binding to {self.host} exposes the env (and the sandboxes it runs) beyond "
                              "this host: pass --token TOKEN (clients send 'Authorization: Bearer "
                              "TOKEN'), or bind to 127.0.0.1")
        if self.max_sessions < 1 or not self.idle_timeout_s > 0 or self.threads < 1 or self.drain_s < 0:
            raise ConfigError("max_sessions and threads must be >= 1, idle_timeout_s > 0, drain_s >= 0")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def build(config: ServeConfig) -> tuple[Any, SessionManager]:
    """The app and its session manager for ``config`` (the env is built on first use)."""
    config.check()
    if config.split not in (None, "train", "dev", "heldout"):
        raise ConfigError(f"unknown split {config.split!r}; use train, dev or heldout")
    if config.splits is not None and not Path(config.splits).is_file():
        raise ConfigError(f"split manifest {config.splits} does not exist; write one with "
                          "`proofgym splits freeze ENV --out FILE`")
    source = EnvSource(config.env_id, dict(config.env_kwargs), split=config.split,
                       splits=Path(config.splits) if config.splits is not None else None)
    first = source.build()  # a bad env id or argument fails now, before the port opens
    try:
        recording = (Recording.to_run_dir(config.record, first, env_id=config.env_id, policy=SERVED_POLICY,
                                          env_kwargs=config.env_kwargs, split=config.split)
                     if config.record is not None else Recording(env_id=config.env_id, policy=SERVED_POLICY))
    finally:
        first.close()
    pool = VerifierPool(config.verifier)  # type: ignore[arg-type]
    verdicts = VerdictStore(pool, detail=config.verdict_detail)
    manager = SessionManager(source, verdicts, max_sessions=config.max_sessions,
                             idle_timeout_s=config.idle_timeout_s, threads=config.threads,
                             recording=recording)
    episodes = EpisodeTier(source, verdicts, recording)
    return build_app(manager, token=config.token, extra_routes=episodes.routes(),
                     on_shutdown=[episodes.shutdown]), manager


class _DrainingServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, manager: SessionManager, drain_s: float) -> None:
        super().__init__(config)
        self.manager = manager
        self.drain_s = drain_s
        self._draining: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def serve(self, sockets: Any = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._draining is not None or self._loop is None:
            super().handle_exit(sig, frame)  # a second signal: stop now
            return

        async def drain() -> None:
            await self.manager.drain(self.drain_s)
            self.should_exit = True

        self._draining = self._loop.create_task(drain())


def serve(config: ServeConfig, *, on_ready: Any = None) -> None:
    """Serve until SIGTERM/Ctrl-C (then drain). ``on_ready(port)`` is called once listening."""
    app, manager = build(config)
    uv_config = uvicorn.Config(app, host=config.host, port=config.port, log_level="warning",
                               lifespan="on", ws="websockets-sansio", ws_max_size=64 * 1024 * 1024,
                               timeout_graceful_shutdown=config.drain_s or None, backlog=2048)
    server = _DrainingServer(uv_config, manager, config.drain_s)

    async def main() -> None:
        task = asyncio.create_task(server.serve())
        while not server.started:
            if task.done():
                await task
                return
            await asyncio.sleep(0.01)
        if on_ready is not None:
            port = server.servers[0].sockets[0].getsockname()[1] if server.servers else config.port
            on_ready(port)
        await task

    try:
        asyncio.run(main())
    finally:
        manager.verdicts.close()  # pending grades land (and are recorded) before the run closes
        manager.recording.close()
        manager.source.close()


__all__ = ["ServeConfig", "build", "is_loopback", "serve"]
