"""The server's sessions: ids, the capacity limit, the idle reaper and the drain.

* ``max_sessions``: opening one more raises :class:`~proofgym.wire.CapacityError`
  (``CAPACITY_REACHED``; HTTP 503 with ``Retry-After``): the client backs off, nothing queues
  without bound.
* The reaper closes a session idle for ``idle_timeout_s`` (an HTTP client that went away; a
  WebSocket session also ends when its connection drops, whatever the cause, kill -9 included).
* :meth:`SessionManager.drain` (SIGTERM): refuse new sessions, let calls in flight finish (up to
  a grace period), then close every session: their envs, sandboxes and processes go with them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import contextlib
import logging
import time

from proofgym.core.errors import ConfigError
from proofgym.rollout.recording import Recording
from proofgym.serve.session import SERVED_POLICY, EnvSource, Session
from proofgym.serve.verdicts import VerdictStore
from proofgym.wire import CapacityError, Code, ServeError

log = logging.getLogger("proofgym.serve")


class SessionManager:
    """Opens, finds, reaps and drains sessions (see the module docstring)."""

    def __init__(self, source: EnvSource, verdicts: VerdictStore, *, max_sessions: int = 256,
                 idle_timeout_s: float = 600.0, threads: int = 32,
                 recording: Recording | None = None) -> None:
        if max_sessions < 1 or not idle_timeout_s > 0 or threads < 1:
            raise ConfigError("max_sessions and threads must be >= 1 and idle_timeout_s > 0")
        self.source = source
        self.verdicts = verdicts
        #: every session's episodes: ids, policy versions, the run directory of ``--record``
        self.recording = recording if recording is not None else Recording(env_id=source.env_id,
                                                                           policy=SERVED_POLICY)
        self.max_sessions = max_sessions
        self.idle_timeout_s = idle_timeout_s
        self.threads = cf.ThreadPoolExecutor(threads, thread_name_prefix="proofgym-serve")
        self.sessions: dict[str, Session] = {}
        self.draining = False
        self.opened = 0
        self.reaped = 0
        self._opening = 0
        self._reaper: asyncio.Task[None] | None = None
        self._build_lock = asyncio.Lock()

    async def open(self, kind: str) -> Session:
        if self.draining:
            raise ServeError(Code.DRAINING, "the server is shutting down; connect to another one")
        if len(self.sessions) + self._opening >= self.max_sessions:
            raise CapacityError(len(self.sessions) + self._opening, self.max_sessions)
        self._opening += 1
        try:
            loop = asyncio.get_running_loop()
            if self.source.template is None:  # the first env builds the shared task set: once
                async with self._build_lock:
                    env = await loop.run_in_executor(self.threads, self.source.build)
            else:
                env = await loop.run_in_executor(self.threads, self.source.build)
        except Exception as exc:
            log.error("building an env failed", exc_info=exc)
            raise ServeError(Code.FACTORY_ERROR, f"the server could not build its environment "
                             f"({type(exc).__name__}); see the server log") from None
        finally:
            self._opening -= 1
        session = Session(self.source, env, self.verdicts, self.threads, kind, self.recording)
        self.sessions[session.id] = session
        self.opened += 1
        return session

    def get(self, session_id: str | None) -> Session:
        session = self.sessions.get(session_id or "")
        if session is None:
            raise ServeError(Code.NOT_FOUND, f"no session {session_id!r} (closed, reaped after "
                             f"{self.idle_timeout_s:g} s idle, or never opened): POST /sessions opens one")
        return session

    async def close(self, session: Session) -> None:
        self.sessions.pop(session.id, None)
        try:
            await session.close()
        except Exception as exc:  # logged; the session is gone from the table either way
            log.error("closing session %s failed", session.id, exc_info=exc)

    # ----------------------------------------------------------------- reaper
    def start(self) -> None:
        self._reaper = asyncio.get_running_loop().create_task(self._reap_forever())

    async def _reap_forever(self) -> None:
        period = min(5.0, self.idle_timeout_s / 4)
        while True:
            await asyncio.sleep(period)
            await self.reap()

    async def reap(self) -> int:
        """Close every session idle longer than ``idle_timeout_s``; how many."""
        now = time.monotonic()
        idle = [s for s in list(self.sessions.values())
                if not s.busy and now - s.last_active > self.idle_timeout_s]
        for session in idle:
            log.info("reaping session %s (idle %.0f s)", session.id, now - session.last_active)
            await self.close(session)
        self.reaped += len(idle)
        return len(idle)

    # ------------------------------------------------------------------ drain
    async def drain(self, grace_s: float = 30.0) -> None:
        """Refuse new sessions, wait (up to ``grace_s``) for calls in flight and pending grades,
        then close every session."""
        self.draining = True
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and (
                any(s.busy for s in self.sessions.values()) or self.verdicts.pending):
            await asyncio.sleep(0.05)
        await self.shutdown()

    async def shutdown(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
            self._reaper = None
        for session in list(self.sessions.values()):
            await self.close(session)
        self.threads.shutdown(wait=False)

    def health(self) -> dict[str, object]:
        return {"status": "draining" if self.draining else "healthy", "env_id": self.source.env_id,
                "active_sessions": len(self.sessions), "max_sessions": self.max_sessions,
                "opened": self.opened, "reaped": self.reaped, "pending_verdicts": self.verdicts.pending}
