"""Summary numbers of a run of trajectories (the body of ``summary.json``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from proofgym.eval.metrics import compute_metrics
from proofgym.record import Trajectory


def summarize(trajectories: Iterable[Trajectory], *, seed: int = 0) -> dict[str, Any]:
    """Headline metrics. Rewards average only *scored* verdicts: grader errors and failed
    episodes are counted apart (``verify_errors``, ``episode_errors``), never as zeros.

    See :func:`proofgym.eval.metrics.compute_metrics` for every key; ``seed`` seeds the
    bootstrap interval so the same run always gives the same summary.
    """
    return compute_metrics(trajectories, seed=seed)
