"""Summary numbers of a run of trajectories."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from proofgym.record import Trajectory


def summarize(trajectories: Iterable[Trajectory]) -> dict[str, Any]:
    """Headline metrics. Rewards average only *scored* verdicts: grader errors and failed
    episodes are counted apart (``verify_errors``, ``episode_errors``), never as zeros."""
    trajs = list(trajectories)
    n = len(trajs)
    scored = [t.reward for t in trajs if t.reward is not None]
    reasons = Counter(t.truncation_reason for t in trajs if t.truncated)
    tool_errors: Counter[str] = Counter()
    steps = 0
    for t in trajs:
        steps += len(t.steps)
        for s in t.steps:
            if "error_kind" in s.info:
                tool_errors[s.info["error_kind"]] += 1
    rate = (lambda k: k / n) if n else (lambda k: 0.0)
    return {
        "episodes": n,
        "scored": len(scored),
        "mean_reward": sum(scored) / len(scored) if scored else None,
        "terminated_rate": rate(sum(t.terminated for t in trajs)),
        "truncated_rate": rate(sum(t.truncated for t in trajs)),
        "truncation_reasons": dict(sorted(reasons.items())),
        "verify_errors": sum(1 for t in trajs if t.verdict is not None and t.verdict.status == "error"),
        "episode_errors": sum(1 for t in trajs if t.status == "error"),
        "steps": steps,
        "tool_errors": dict(sorted(tool_errors.items())),
    }
