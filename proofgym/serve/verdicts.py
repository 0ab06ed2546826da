"""Verdicts out of band: every finished episode's grade, ``pending`` until its grader answers.

Keyed by the episode's trajectory id and the verifier version that graded it. A record goes
``pending`` -> ``scored`` or ``error`` (the grader failed: never a 0 for an unscored episode;
the reason stays in the server's log unless the server sends verdict detail). Grading runs in
the server's :class:`~proofgym.verify.pool.VerifierPool`, so its timeouts and isolation hold.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures as cf
import logging
from typing import Any

from proofgym.core import Verdict, describe_exception
from proofgym.env import VerificationJob
from proofgym.verify.pool import VerifierPool
from proofgym.wire import public_verdict

log = logging.getLogger("proofgym.serve")

#: Records kept (oldest dropped first): a client fetches its verdict long before this many
#: later episodes finish.
MAX_RECORDS = 100_000


class VerdictRecord:
    """One episode's grade as the server reports it."""

    def __init__(self, trajectory_id: str, task_id: str, verifier_version: str,
                 future: cf.Future[Verdict], detail: bool) -> None:
        self.trajectory_id = trajectory_id
        self.task_id = task_id
        self.verifier_version = verifier_version
        self.future = future
        self._detail = detail

    @property
    def status(self) -> str:
        if not self.future.done():
            return "pending"
        return self.future.result().status

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"trajectory_id": self.trajectory_id, "task_id": self.task_id,
                               "verifier_version": self.verifier_version, "status": self.status}
        if self.future.done():
            verdict = self.future.result()
            if verdict.status == "error":
                log.warning("grading %s failed: %s", self.trajectory_id, verdict.error)
            out["verdict"] = public_verdict(verdict, detail=self._detail)
        return out

    async def wait(self, timeout_s: float | None = None) -> dict[str, Any]:
        """The public verdict once graded (``timeout_s``: at most that long, then the pending record)."""
        try:
            await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(self.future)), timeout_s)
        except (TimeoutError, asyncio.TimeoutError):
            return self.to_dict()
        return self.to_dict()["verdict"]


class VerdictStore:
    """The server's verdict records (see the module docstring)."""

    def __init__(self, pool: VerifierPool, *, detail: bool = False) -> None:
        self.pool = pool
        self.detail = detail
        self._records: collections.OrderedDict[tuple[str, str], VerdictRecord] = collections.OrderedDict()
        self._latest: dict[str, str] = {}

    def submit(self, trajectory_id: str, job: VerificationJob, task_id: str) -> VerdictRecord:
        try:
            future = self.pool.submit(job, trajectory_id)
        except Exception as exc:  # a closed pool (draining): an error verdict, never a lost grade
            future = cf.Future()
            future.set_result(Verdict.failed(f"grading could not run: {describe_exception(exc)}"))
        record = VerdictRecord(trajectory_id, task_id, job.version, future, self.detail)
        self._records[(trajectory_id, job.version)] = record
        self._latest[trajectory_id] = job.version
        while len(self._records) > MAX_RECORDS:
            (old, _), _ = self._records.popitem(last=False)
            self._latest.pop(old, None)
        return record

    def get(self, trajectory_id: str, verifier_version: str | None = None) -> VerdictRecord | None:
        version = verifier_version or self._latest.get(trajectory_id)
        if version is None:
            return None
        return self._records.get((trajectory_id, version))

    @property
    def pending(self) -> int:
        return sum(not r.future.done() for r in self._records.values())

    def close(self) -> None:
        self.pool.close()
