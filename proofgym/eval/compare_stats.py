"""Paired statistics for comparing two runs on the same tasks.

The unit is the *task*: both runs attempted the same tasks, so the question is whether the
per-task differences are centred away from zero. The interval is scipy's paired bootstrap over
tasks and the pass-rate test is McNemar's exact test (scipy's binomial test on the discordant
pairs); nothing here re-implements a test scipy has.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from proofgym.core import ConfigError
from proofgym.core.errors import ComparisonError


def _scipy_stats():  # scipy is an optional extra: a clear error, not an ImportError traceback
    try:
        from scipy import stats
    except ImportError:  # pragma: no cover - exercised only without the extra
        raise ConfigError("comparing runs needs scipy: pip install 'proofgym[compare]'") from None
    return stats


@dataclass(frozen=True)
class PairedDifference:
    """The mean of ``b - a`` over paired tasks, with a percentile bootstrap interval (tasks
    resampled with replacement, both runs' values of a task kept together). ``low``/``high``
    are ``None`` with fewer than two pairs (no interval can be drawn from one task)."""

    n: int
    mean_a: float
    mean_b: float
    delta: float
    low: float | None
    high: float | None
    confidence: float

    @property
    def excludes_zero(self) -> bool:
        """True when the interval lies wholly on one side of zero."""
        return self.low is not None and self.high is not None and (self.low > 0 or self.high < 0)

    def to_dict(self) -> dict[str, float | int | bool | None]:
        return {"n": self.n, "mean_a": self.mean_a, "mean_b": self.mean_b, "delta": self.delta,
                "ci": [self.low, self.high] if self.low is not None else None,
                "confidence": self.confidence, "ci_excludes_zero": self.excludes_zero}


def paired_bootstrap(a: Sequence[float], b: Sequence[float], *, confidence: float = 0.95,
                     resamples: int = 4000, seed: int = 0) -> PairedDifference:
    """Mean of ``b[i] - a[i]`` and its paired percentile bootstrap interval
    (``scipy.stats.bootstrap(..., paired=True)``), seeded so equal inputs give equal intervals.

    When every difference is the same value every resample has that mean, so the interval is that
    point (computed without resampling).
    """
    if len(a) != len(b):
        raise ComparisonError(f"paired samples need equal lengths, got {len(a)} and {len(b)}")
    if not a:
        raise ComparisonError("no paired tasks: the runs share no scored task")
    xa = np.asarray(a, dtype=float)
    xb = np.asarray(b, dtype=float)
    diffs = xb - xa
    delta = float(diffs.mean())
    low: float | None
    high: float | None
    if len(diffs) < 2:
        low = high = None
    elif np.all(diffs == diffs[0]):
        low = high = float(diffs[0])
    else:
        stats = _scipy_stats()
        res = stats.bootstrap((xa, xb), lambda x, y, axis=-1: np.mean(y - x, axis=axis), paired=True,
                              vectorized=True, confidence_level=confidence, n_resamples=resamples,
                              method="percentile", rng=np.random.default_rng(seed))
        low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return PairedDifference(len(diffs), float(xa.mean()), float(xb.mean()), delta, low, high, confidence)


@dataclass(frozen=True)
class McNemar:
    """McNemar's exact test on paired pass/fail outcomes. ``a_only``: pairs A passed and B
    failed; ``b_only``: the reverse. Under the null (equal pass rates) each discordant pair is a
    fair coin, so the p-value is the two-sided binomial test of ``b_only`` in ``a_only + b_only``
    trials at 0.5; with no discordant pair it is 1.0."""

    both: int
    a_only: int
    b_only: int
    neither: int
    p_value: float

    def to_dict(self) -> dict[str, float | int]:
        return {"both_pass": self.both, "a_only": self.a_only, "b_only": self.b_only,
                "neither": self.neither, "discordant": self.a_only + self.b_only, "p_value": self.p_value}


def mcnemar_exact(a_pass: Sequence[bool], b_pass: Sequence[bool]) -> McNemar:
    """McNemar's exact test of paired outcomes (``scipy.stats.binomtest`` on the discordant pairs)."""
    if len(a_pass) != len(b_pass):
        raise ComparisonError(f"paired outcomes need equal lengths, got {len(a_pass)} and {len(b_pass)}")
    pairs = list(zip((bool(x) for x in a_pass), (bool(x) for x in b_pass), strict=True))
    both = sum(x and y for x, y in pairs)
    a_only = sum(x and not y for x, y in pairs)
    b_only = sum(y and not x for x, y in pairs)
    neither = len(pairs) - both - a_only - b_only
    discordant = a_only + b_only
    p = 1.0 if discordant == 0 else float(
        _scipy_stats().binomtest(b_only, discordant, 0.5, alternative="two-sided").pvalue)
    return McNemar(both, a_only, b_only, neither, p)


def win_tie_loss(a: Sequence[float], b: Sequence[float], *, tolerance: float = 1e-9) -> dict[str, int]:
    """Per pair, from B's side: ``win`` when B scored higher than A, ``loss`` when lower,
    ``tie`` within ``tolerance``."""
    wins = sum(y - x > tolerance for x, y in zip(a, b, strict=True))
    losses = sum(x - y > tolerance for x, y in zip(a, b, strict=True))
    return {"win": wins, "tie": len(a) - wins - losses, "loss": losses}
