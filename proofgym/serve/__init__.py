"""``proofgym serve``: an env server for trainers in other processes (DESIGN.md, Rollouts).

The step tier (reset/step/close per session, over OpenEnv's WebSocket messages or HTTP with a
session header), verdicts out of band, task and split listing, and the episode tier. The parts:
:mod:`~proofgym.wire` (the typed messages, error codes; shared with the client),
:mod:`~proofgym.serve.protocol` (what a client is told about an error), :mod:`~proofgym.serve.session` (one
client's env and episode, the held-out guard), :mod:`~proofgym.serve.sessions` (capacity, reaper,
drain), :mod:`~proofgym.serve.verdicts`, :mod:`~proofgym.serve.app` (routes),
:mod:`~proofgym.serve.server` (uvicorn, loopback and tokens, SIGTERM).
"""

from proofgym.serve.server import ServeConfig, build, is_loopback, serve
from proofgym.wire import SESSION_HEADER, CapacityError, Code, ServeError

__all__ = ["SESSION_HEADER", "CapacityError", "Code", "ServeConfig", "ServeError", "build", "is_loopback",
           "serve"]
