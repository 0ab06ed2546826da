"""The server's side of the wire (:mod:`proofgym.wire`): what a client is told about an error.

An error raised inside an env may quote hidden task data (a grader's path, an expected answer),
so only errors written for the agent's operator go out as they are; any other gets a reference
to the server's log.
"""

from __future__ import annotations

import logging
import uuid

from proofgym.core import EpisodeStateError, TaskNotFoundError
from proofgym.core.errors import Code, ServeError
from proofgym.tasks import HeldOutError

log = logging.getLogger("proofgym.serve")

#: Errors whose text is written for the agent's operator: sent as they are.
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
