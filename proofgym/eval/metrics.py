"""The metrics of a run: rewards with an interval, pass@k, rubric means, rates, tokens and time.

Every function takes plain trajectories and returns JSON-ready values. Undefined is ``None`` or an
absent key, never a guess: a reward mean over zero scored episodes is ``None``, and pass@k is
not reported for tasks with fewer than ``k`` scored attempts.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from proofgym.core import ToolCallAction
from proofgym.core.errors import ConfigError
from proofgym.record import RunRecord, Trajectory

#: A scored attempt counts as a success for pass@k when its reward reaches this value.
PASS_THRESHOLD = 1.0

#: Token-count keys read from ``StepRecord.usage`` (OpenAI's names first, then Anthropic-style).
_IN_KEYS = ("prompt_tokens", "input_tokens")
_OUT_KEYS = ("completion_tokens", "output_tokens")


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k estimator of Chen et al. (2021): ``1 - C(n-c, k) / C(n, k)``.

    The probability that at least one of ``k`` attempts drawn without replacement from ``n``
    attempts, ``c`` of them correct, is correct. Raises for ``k > n``: that is undefined.
    """
    if not 0 <= c <= n:
        raise ConfigError(f"need 0 <= c <= n, got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ConfigError(f"pass@{k} is undefined with {n} attempts (need 1 <= k <= n)")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def bootstrap_interval(groups: Sequence[Sequence[float]], *, confidence: float = 0.95,
                       resamples: int = 2000, seed: int = 0) -> tuple[float, float] | None:
    """Percentile bootstrap interval of the mean reward, resampling *tasks* (clusters).

    ``groups`` holds the scored rewards of each task. Attempts at one task are correlated, so
    the unit resampled is the task and the statistic is the pooled mean of the resampled tasks'
    attempts; with one attempt per task this is the ordinary bootstrap of the mean. Seeded, so
    the same rewards always give the same interval. ``None`` when nothing was scored.
    """
    groups = [g for g in groups if len(g)]
    if not groups:
        return None
    sums = np.array([float(sum(g)) for g in groups])
    counts = np.array([len(g) for g in groups], dtype=float)
    rng = np.random.Generator(np.random.PCG64(seed))
    means = np.empty(resamples)
    # Chunked so a 10,000-task run does not allocate resamples x tasks indices at once.
    chunk = max(1, 2_000_000 // len(groups))
    for start in range(0, resamples, chunk):
        rows = min(chunk, resamples - start)
        idx = rng.integers(0, len(groups), size=(rows, len(groups)))
        means[start:start + rows] = sums[idx].sum(axis=1) / counts[idx].sum(axis=1)
    alpha = (1.0 - confidence) / 2
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return float(low), float(high)


def attempts_by_task(trajectories: Iterable[Trajectory]) -> dict[str, list[Trajectory]]:
    """Trajectories grouped by task id, each group ordered by attempt index
    (``Trajectory.extra["attempt"]``, falling back to record order); groups in task id order, so
    the summary (``per_task``, the seeded bootstrap interval) does not depend on the order in
    which episodes happened to finish (concurrency, backend)."""
    groups: dict[str, list[Trajectory]] = defaultdict(list)
    for t in trajectories:
        groups[t.task_id].append(t)
    for group in groups.values():
        group.sort(key=lambda t: _attempt(t, -1))
    return dict(sorted(groups.items()))


def _attempt(t: Trajectory, default: int) -> int:
    value = t.extra.get("attempt", default)
    return value if isinstance(value, int) else default


def pass_at_k_table(groups: Mapping[str, Sequence[Trajectory]], *,
                    threshold: float = PASS_THRESHOLD) -> tuple[dict[str, float], dict[str, int]]:
    """pass@k for k = 1 .. the most scored attempts any task has, averaged over the tasks that
    have at least k scored attempts. Returns ``({k: value}, {k: tasks counted})`` (string keys,
    for JSON). Unscored attempts (grader or episode errors) are left out of n, not counted as
    failures."""
    per_task = []
    for group in groups.values():
        rewards = [t.reward for t in group if t.reward is not None]
        if rewards:
            per_task.append((len(rewards), sum(r >= threshold for r in rewards)))
    values: dict[str, float] = {}
    tasks: dict[str, int] = {}
    for k in range(1, max((n for n, _ in per_task), default=0) + 1):
        estimates = [pass_at_k(n, c, k) for n, c in per_task if n >= k]
        values[str(k)] = sum(estimates) / len(estimates)
        tasks[str(k)] = len(estimates)
    return values, tasks


def rubric_means(trajectories: Iterable[Trajectory]) -> tuple[dict[str, float], dict[str, float]]:
    """Mean of each rubric component and each logged metric over the scored verdicts that
    carry it."""
    comp: dict[str, list[float]] = defaultdict(list)
    met: dict[str, list[float]] = defaultdict(list)
    for t in trajectories:
        if t.verdict is None or not t.verdict.scored:
            continue
        for name, value in t.verdict.components.items():
            comp[name].append(float(value))
        for name, value in t.verdict.metrics.items():
            if isinstance(value, (int, float)):  # bools count as 0/1
                met[name].append(float(value))
    return ({k: sum(v) / len(v) for k, v in sorted(comp.items())},
            {k: sum(v) / len(v) for k, v in sorted(met.items())})


def end_reason(t: Trajectory) -> str:
    """How an episode ended: ``terminated``, ``truncated:REASON`` or ``error``."""
    if t.status == "error":
        return "error"
    if t.truncated:
        return f"truncated:{t.truncation_reason or 'unknown'}"
    if t.terminated:
        return "terminated"
    return "unfinished"


def token_totals(trajectories: Iterable[Trajectory]) -> dict[str, Any] | None:
    """Prompt (in) and completion (out) tokens summed over every step's ``usage``; ``None``
    when no step reported usage (a scripted policy spends no tokens; that is not zero)."""
    tokens_in = tokens_out = 0
    episodes = 0
    for t in trajectories:
        seen = False
        for s in t.steps:
            if not s.usage:
                continue
            seen = True
            tokens_in += _first_int(s.usage, _IN_KEYS)
            tokens_out += _first_int(s.usage, _OUT_KEYS)
        episodes += seen
    if not episodes:
        return None
    return {"in": tokens_in, "out": tokens_out, "episodes_with_usage": episodes,
            "mean_in": tokens_in / episodes, "mean_out": tokens_out / episodes}


def _first_int(usage: Mapping[str, Any], keys: Sequence[str]) -> int:
    for key in keys:
        value = usage.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return int(value)
    return 0


def time_split(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    """Seconds spent in the model (``policy_s``), the tools (``env_s``) and verification
    (``verify_s``), summed over episodes, plus the sum of the episodes' own durations
    (``total_s``), and the CPU seconds of the grading sandboxes (``sandbox_cpu_s``) when the
    graders measured them. Sums, not the run's wall time: concurrent episodes and out-of-band grading
    overlap, so the sum can exceed the time the run took."""
    keys = ("policy_s", "env_s", "verify_s", "total_s")
    out = {k: float(sum(t.timings.get(k, 0.0) for t in trajectories)) for k in keys}
    # CPU of the sandboxes that graded (a grader's ``sandbox_cpu_s`` metric): getrusage of this
    # process never sees it, the sandboxes are children of a spawner it does not reap
    cpu = [t.verdict.metrics["sandbox_cpu_s"] for t in trajectories
           if t.verdict is not None and "sandbox_cpu_s" in t.verdict.metrics]
    if cpu:
        out["sandbox_cpu_s"] = float(sum(cpu))
    return out


def per_task(groups: Mapping[str, Sequence[Trajectory]], *,
             threshold: float = PASS_THRESHOLD) -> list[dict[str, Any]]:
    """One row per task: attempts, scored, successes, mean reward, errors, and pass@1."""
    rows = []
    for task_id, group in groups.items():
        rewards = [t.reward for t in group if t.reward is not None]
        successes = sum(r >= threshold for r in rewards)
        rows.append({
            "task_id": task_id,
            "attempts": len(group),
            "scored": len(rewards),
            "successes": successes,
            "mean_reward": sum(rewards) / len(rewards) if rewards else None,
            "best_reward": max(rewards) if rewards else None,
            "pass_at_1": successes / len(rewards) if rewards else None,
            "verify_errors": sum(t.verdict is not None and t.verdict.status == "error" for t in group),
            "episode_errors": sum(t.status == "error" for t in group),
            "truncated": sum(bool(t.truncated) for t in group),
        })
    return rows


def compute_metrics(trajectories: Iterable[Trajectory], *, seed: int = 0, confidence: float = 0.95,
                    threshold: float = PASS_THRESHOLD) -> dict[str, Any]:
    """Every metric of a run, as one JSON-ready dict (the body of ``summary.json``).

    Keys: ``episodes``, ``scored``, ``unscored``, ``mean_reward`` (over scored episodes) and
    ``mean_reward_ci`` (a ``[low, high]`` bootstrap interval, seeded by ``seed``),
    ``mean_reward_all`` (every episode, an unscored one counting 0: a run cannot raise it by
    turning failures into grader errors) and ``error_rate`` (the unscored share of episodes),
    ``pass_at_k`` and ``pass_at_k_tasks``, ``components`` and ``metrics`` (rubric means), ``terminated_rate``,
    ``truncated_rate``, ``truncation_reasons`` (counts) and ``truncation_rates``, ``end_reasons``
    (rates of terminated / truncated:REASON / error), ``tool_calls``, ``tool_errors`` (counts by
    kind) and ``tool_error_rates`` (per tool call), ``verify_errors`` (grader errors),
    ``episode_errors``, ``steps``, ``tokens``, ``time``, ``tasks``, ``per_task`` and
    ``policy_versions`` (:func:`policy_versions`: trajectory age in training steps).
    """
    trajs = list(trajectories)
    n = len(trajs)
    groups = attempts_by_task(trajs)
    scored = [t.reward for t in trajs if t.reward is not None]

    def rate(count: int) -> float:
        return count / n if n else 0.0

    reasons = Counter(t.truncation_reason or "unknown" for t in trajs if t.truncated)
    ends = Counter(end_reason(t) for t in trajs)
    tool_errors: Counter[str] = Counter()
    tool_calls = steps = 0
    for t in trajs:
        steps += len(t.steps)
        for s in t.steps:
            if isinstance(s.action, ToolCallAction):
                tool_calls += 1
            if "error_kind" in s.info:
                tool_errors[str(s.info["error_kind"])] += 1
    interval = bootstrap_interval(
        [[t.reward for t in g if t.reward is not None] for g in groups.values()],
        confidence=confidence, seed=seed)
    pass_k, pass_k_tasks = pass_at_k_table(groups, threshold=threshold)
    components, metrics = rubric_means(trajs)
    return {
        "episodes": n,
        "policy_versions": policy_versions(trajs),
        "scored": len(scored),
        "unscored": n - len(scored),
        "mean_reward": sum(scored) / len(scored) if scored else None,
        "mean_reward_ci": list(interval) if interval else None,
        "mean_reward_all": sum(scored) / n if n else None,
        "error_rate": rate(n - len(scored)),
        "ci_confidence": confidence,
        "pass_threshold": threshold,
        "pass_at_k": pass_k,
        "pass_at_k_tasks": pass_k_tasks,
        "components": components,
        "metrics": metrics,
        "terminated_rate": rate(sum(bool(t.terminated) for t in trajs)),
        "truncated_rate": rate(sum(bool(t.truncated) for t in trajs)),
        "truncation_reasons": dict(sorted(reasons.items())),
        "truncation_rates": {k: rate(v) for k, v in sorted(reasons.items())},
        "end_reasons": {k: rate(v) for k, v in sorted(ends.items())},
        "verify_errors": sum(1 for t in trajs if t.verdict is not None and t.verdict.status == "error"),
        "episode_errors": sum(1 for t in trajs if t.status == "error"),
        "steps": steps,
        "tool_calls": tool_calls,
        "tool_errors": dict(sorted(tool_errors.items())),
        "tool_error_rates": {k: v / tool_calls for k, v in sorted(tool_errors.items())} if tool_calls else {},
        "tokens": token_totals(trajs),
        "time": time_split(trajs),
        "tasks": len(groups),
        "attempts_per_task": _attempt_counts(groups),
        "per_task": per_task(groups, threshold=threshold),
    }


def policy_versions(trajectories: Sequence[Trajectory]) -> dict[str, Any]:
    """The policy versions a run's episodes were sampled with (``versions``: counts), and when
    they are training steps (integers) the trajectory age against the newest (``current``):
    ``max_age`` and ``mean_age``, in steps (async training's off-policy lag)."""
    counts = Counter(str(t.policy.get("version")) for t in trajectories
                     if isinstance(t.policy, dict) and t.policy.get("version") is not None)
    out: dict[str, Any] = {"versions": dict(sorted(counts.items())), "current": None,
                           "max_age": None, "mean_age": None}
    if counts and all(v.lstrip("-").isdigit() for v in counts):
        current = max(int(v) for v in counts)
        ages = [current - int(v) for v, n in counts.items() for _ in range(n)]
        out.update(current=current, max_age=max(ages), mean_age=sum(ages) / len(ages))
    return out


def summarize(trajectories: Iterable[Trajectory], fields: Mapping[str, Any] | None = None, *,
              seed: int = 0) -> dict[str, Any]:
    """The summary of a run (the body of ``summary.json``): ``fields``, what the run recorded about
    itself (env id, policy, contract id, split, warnings, the plan), then every metric of
    :func:`compute_metrics`. Rewards average only *scored* verdicts: grader errors and failed
    episodes are counted apart (``verify_errors``, ``episode_errors``), never as zeros. ``seed``
    seeds the bootstrap interval, so the same run always gives the same summary.

    The one computation of a summary: ``evaluate`` writes it, and ``report`` and ``compare`` get
    it through :func:`summary_of`.
    """
    metrics = compute_metrics(trajectories, seed=seed)
    # the run's own timings (its grader pool's start-up) are in no episode: kept from ``fields``
    recorded = (fields or {}).get("time")
    if isinstance(recorded, Mapping):
        own = {k: v for k, v in recorded.items() if k not in metrics["time"]}
        metrics["time"] = {**metrics["time"], **own}
    return {**(fields or {}), **metrics}


def summary_of(run: RunRecord) -> dict[str, Any]:
    """The summary of a run read from disk: its ``summary.json`` fields with the metrics of the
    trajectories on disk, by :func:`summarize` (a killed run has no ``summary.json``, and a run
    resumed and killed again has a stale one, so the numbers always come from the records)."""
    return summarize(run.trajectories, run.summary)


def _attempt_counts(groups: Mapping[str, Sequence[Trajectory]]) -> dict[str, int] | None:
    if not groups:
        return None
    sizes = [len(g) for g in groups.values()]
    return {"min": min(sizes), "max": max(sizes)}
