"""The paired statistics of `proofgym compare`, against hand-computed values and scipy."""

from __future__ import annotations

import math

import numpy as np
import pytest

from proofgym.eval.compare_stats import mcnemar_exact, paired_bootstrap, win_tie_loss


def _scipy_stats():
    from scipy import stats  # (a second to import: in the worker that runs these, not at collection)

    return stats

def test_mean_difference_is_b_minus_a_over_pairs():
    d = paired_bootstrap([0, 1, 0, 1, 1], [1, 1, 1, 0, 1])
    assert (d.n, d.mean_a, d.mean_b) == (5, pytest.approx(0.6), pytest.approx(0.8))
    assert d.delta == pytest.approx(0.2)  # (1 + 0 + 1 - 1 + 0) / 5


def test_two_pairs_give_the_hand_computed_percentile_interval():
    # differences 0 and 1: a resampled mean is 0 (p 1/4), 0.5 (1/2) or 1 (1/4), so the 2.5% and
    # 97.5% quantiles of the bootstrap distribution are 0 and 1
    d = paired_bootstrap([1.0, 0.0], [1.0, 1.0], resamples=4000)
    assert (d.low, d.high) == (0.0, 1.0) and not d.excludes_zero


def test_interval_is_scipys_paired_bootstrap():
    a = [0.2, 0.5, 0.9, 0.1, 0.4, 0.7, 0.3]
    b = [0.6, 0.4, 1.0, 0.5, 0.8, 0.7, 0.9]
    d = paired_bootstrap(a, b, resamples=3000, seed=7)
    stats = _scipy_stats()
    ref = stats.bootstrap((np.array(a), np.array(b)), lambda x, y, axis=-1: np.mean(y - x, axis=axis),
                          paired=True, vectorized=True, n_resamples=3000, method="percentile",
                          rng=np.random.default_rng(7)).confidence_interval
    assert (d.low, d.high) == (pytest.approx(ref.low), pytest.approx(ref.high))
    assert d.low > 0 and d.excludes_zero  # B is better on 5 of 7 tasks and never worse by much
    assert paired_bootstrap(a, b, resamples=3000, seed=7) == d  # seeded: the same interval again


def test_identical_differences_have_a_point_interval_and_one_pair_none():
    same = paired_bootstrap([1, 1, 1], [0, 0, 0])
    assert (same.delta, same.low, same.high) == (-1.0, -1.0, -1.0) and same.excludes_zero
    none = paired_bootstrap([1, 0], [1, 0])
    assert (none.delta, none.low, none.high) == (0.0, 0.0, 0.0) and not none.excludes_zero
    one = paired_bootstrap([0.5], [1.0])
    assert one.delta == 0.5 and one.low is None and one.to_dict()["ci"] is None


def test_bad_pairs_are_refused():
    with pytest.raises(ValueError, match="equal lengths"):
        paired_bootstrap([1, 0], [1])
    with pytest.raises(ValueError, match="no paired tasks"):
        paired_bootstrap([], [])
    with pytest.raises(ValueError, match="equal lengths"):
        mcnemar_exact([True], [True, False])


def _hand_mcnemar(b: int, c: int) -> float:
    """Exact two-sided McNemar: twice the smaller binomial tail at p = 1/2, capped at 1."""
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def test_mcnemar_counts_and_hand_computed_p_values():
    t = mcnemar_exact([1, 1, 1, 0, 0, 1], [1, 0, 0, 0, 1, 1])
    assert (t.both, t.a_only, t.b_only, t.neither) == (2, 2, 1, 1)
    assert t.p_value == pytest.approx(1.0)
    # ten tasks passed only by A: 2 * 0.5**10
    assert mcnemar_exact([1] * 10, [0] * 10).p_value == pytest.approx(0.001953125)
    assert mcnemar_exact([0] * 5, [1] * 5).p_value == pytest.approx(0.0625)
    assert mcnemar_exact([1, 0], [1, 0]).p_value == 1.0  # no discordant pair
    rng = np.random.default_rng(0)
    for _ in range(25):
        a = rng.integers(0, 2, size=int(rng.integers(1, 30))).astype(bool)
        b = rng.integers(0, 2, size=len(a)).astype(bool)
        t = mcnemar_exact(list(a), list(b))
        assert t.p_value == pytest.approx(_hand_mcnemar(t.a_only, t.b_only))
        if t.a_only + t.b_only:
            assert t.p_value == pytest.approx(_scipy_stats().binomtest(t.b_only, t.a_only + t.b_only).pvalue)


def test_win_tie_loss_is_from_bs_side():
    assert win_tie_loss([0.0, 1.0, 0.5, 0.5], [1.0, 0.0, 0.5, 0.75]) == {"win": 2, "tie": 1, "loss": 1}
