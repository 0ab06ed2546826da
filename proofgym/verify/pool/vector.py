"""Grade every env of a Gymnasium vector env at once (``SyncVectorEnv`` or ``AsyncVectorEnv``).

The envs of an ``AsyncVectorEnv`` live in worker processes, and ``vec.call`` passes all of them
the same arguments, so each env's trace goes to it through ``set_attr`` first; each worker then
freezes its episode (``grading_job``) and the jobs come back to be graded concurrently in a
:class:`VerifierPool`, off the workers.
"""

from __future__ import annotations

import concurrent.futures as cf
import uuid
from collections.abc import Sequence
from typing import Any

from proofgym.core import Trace, Verdict
from proofgym.core.defaults import DEFAULTS
from proofgym.core.errors import ConfigError
from proofgym.verify.pool.verifier_pool import VerifierPool


def verify_vector(vec_env: Any, traces: Sequence[Trace | list[Any]], *,
                  pool: VerifierPool | None = None) -> list[Verdict]:
    """The verdict of each env's current (or just finished) episode, given its trace.

    Args:
        vec_env: A Gymnasium vector env of proofgym envs.
        traces: One trace per env, in env order.
        pool: Where to grade (default: a thread pool for this call, all jobs at once).
    """
    num_envs = getattr(vec_env, "num_envs", None)
    if num_envs is None or len(traces) != num_envs:
        raise ConfigError(f"got {len(traces)} traces for a vector env of {num_envs} envs; "
                          "pass one trace per env, in env order")
    vec_env.set_attr("grading_trace", [Trace.coerce(t) for t in traces])
    jobs = vec_env.call("grading_job")
    own = pool is None
    grader = (VerifierPool(DEFAULTS.verifier_backend(one_call=True), max_in_flight=max(1, len(jobs)))
              if pool is None else pool)
    try:
        futures = [grader.submit(job, f"vector/{uuid.uuid4().hex}") for job in jobs]
        cf.wait(futures)
        return [f.result() for f in futures]
    finally:
        if own:
            grader.close()
