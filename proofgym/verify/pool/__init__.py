"""The verifier pool: the one road every grade takes (timeouts, crash isolation, backpressure, and
"a grader error is never a 0").

``VerifierPool`` queues :class:`~proofgym.env.VerificationJob` s and runs them on a backend: inline
threads, forked worker processes (the default), or a Ray cluster.
"""

from proofgym.verify.pool.vector import verify_vector
from proofgym.verify.pool.verifier_pool import (
    PoolClosedError,
    VerifierPool,
    job_key,
    job_timeout,
    pool_for,
    timed_out,
)

__all__ = ["PoolClosedError", "VerifierPool", "job_key", "job_timeout", "pool_for", "timed_out",
           "verify_vector"]
