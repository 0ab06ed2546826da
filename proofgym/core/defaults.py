"""Run defaults, decided once: the CLI (``proofgym eval``/``validate``/``verify``/``serve``),
``evaluate()``, ``validate()``, ``regrade_run()``, the :class:`~proofgym.rollout.Orchestrator`, the
:class:`~proofgym.verify.pool.VerifierPool`, the TRL reward, the OpenAI client and Ray slots all
read :data:`DEFAULTS` (tests/core/test_defaults.py checks that they agree with it, and
tests/test_architecture.py that no other module writes a verifier backend of its own).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

#: Where gradings run: worker processes here, grader actors on a Ray cluster, or threads here.
VerifierBackend = Literal["process", "inline", "ray"]


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
    #: Largest share of unscored episodes a run accepts (``evaluate()`` raises
    #: :class:`~proofgym.errors.ErrorBudgetExceeded` above it; ``proofgym eval`` exits 3).
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

    def verifier_backend(self, slots: str = "local", *, one_call: bool = False,
                         settled: bool = False) -> VerifierBackend:
        """Where gradings run when nobody says: ``"ray"`` (grader actors on the cluster) when the
        env slots run on Ray (``slots="ray"``), else ``"process"``: crash-isolated worker
        processes, so a grader that segfaults or calls ``os._exit`` gives an error verdict and the
        caller carries on. The worker processes re-import a script's ``__main__``, so a script
        needs an ``if __name__ == "__main__":`` guard, and its tasks must pickle (``"inline"``,
        threads in the caller's process, is the explicit choice otherwise).

        ``one_call``: the pool of one call that grades a single episode or batch and closes it
        (``run_episode``, ``verify_vector``): ``"inline"``, as worker processes would take
        seconds to start for each call (pass such a call a pool to isolate its graders).

        ``settled``: the run's envs grade their own episodes (a ``RemoteEnv``: the server returns
        each verdict with the last step), so its jobs come settled: ``"inline"``, which answers
        them without starting a worker process."""
        if one_call or settled:
            return "inline"
        return "ray" if slots == "ray" else "process"

    def validate_workers(self, concurrency: int | None = None) -> int:
        """``concurrency``, else :attr:`validate_concurrency`, else the CPU count."""
        if concurrency is not None:
            return concurrency
        return self.validate_concurrency or os.cpu_count() or 1


#: The defaults every entry point reads.
DEFAULTS = RunDefaults()
