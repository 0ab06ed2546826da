"""Run defaults, decided once: the CLI (``proofgym eval``/``validate``/``verify``), ``evaluate()``,
``validate()``, the :class:`~proofgym.rollout.Orchestrator`, the
:class:`~proofgym.verify.pool.VerifierPool`, the OpenAI client and Ray slots all read
:data:`DEFAULTS` (tests/test_defaults.py checks that their signatures agree with it).
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class RunDefaults:
    """What a run uses when nobody says otherwise."""

    #: Episodes in flight at once (``eval -c``, ``evaluate(concurrency=)``, the orchestrator).
    concurrency: int = 1
    #: Attempts per task (``eval -G``, ``evaluate(repeats=)``).
    repeats: int = 1
    #: Seed of the first episode (episode i uses seed + i).
    seed: int = 0
    #: Seconds one grading may take (``--grader-timeout``, the verifier pool, ``validate()``).
    grader_timeout_s: float = 60.0
    #: Largest share of unscored episodes ``proofgym eval`` accepts before exiting 3.
    max_error_rate: float = 0.05
    #: Seconds one model call may take before it is retried (``--client-timeout``).
    client_timeout_s: float = 120.0
    #: Retries of a failed model call (429, 5xx, timeouts, dropped connections).
    client_max_retries: int = 4
    #: The first retry's delay; it doubles per retry up to ``client_max_backoff_s`` (with jitter).
    client_backoff_s: float = 0.25
    client_max_backoff_s: float = 8.0
    #: The version recorded on a policy's trajectories.
    policy_version: str = "0"
    #: CPUs each env slot reserves on its node (``--backend ray``).
    cpus_per_slot: float = 1.0
    #: Tasks validated at once (``validate -c``, ``validate(concurrency=)``); ``None``: the CPU count.
    validate_concurrency: int | None = None

    def validate_workers(self, concurrency: int | None = None) -> int:
        """``concurrency``, else :attr:`validate_concurrency`, else the CPU count."""
        if concurrency is not None:
            return concurrency
        return self.validate_concurrency or os.cpu_count() or 1


#: The defaults every entry point reads.
DEFAULTS = RunDefaults()
