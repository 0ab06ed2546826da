"""Rubrics: weighted sums, metrics that never pay, gates, scales, and isolation of failing parts."""

from __future__ import annotations

import threading

import pytest

from proofgym import Rubric, TurnCompleteAction, Verdict
from proofgym.core import TraceStep
from proofgym.verify import Component, MultiRubric, score_all

TRACE = [TraceStep(TurnCompleteAction("The answer is \\boxed{42}."), {"type": "episode_end"})]


def const(value):
    return lambda trace, runtime: value


def test_weighted_mean_and_sum() -> None:
    parts = [Component("a", const(1.0), weight=3), Component("b", const(0.0), weight=1),
             Component("c", const(0.5), weight=2)]
    v = Rubric(parts).score(TRACE)
    assert v.status == "scored"
    assert v.reward == pytest.approx((3 * 1.0 + 1 * 0.0 + 2 * 0.5) / 6)
    assert v.components == {"a": 1.0, "b": 0.0, "c": 0.5} and v.metrics == {} and v.errors == {}
    assert Rubric(parts, aggregate="sum").score(TRACE).reward == pytest.approx(4.0)


def test_scales_are_normalised_before_combining() -> None:
    rubric = Rubric([Component("stars", const(4), scale=(1, 5)), Component("ok", const(True)),
                     Component("penalty", const(-0.5), scale=(-1, 0))])
    v = rubric.score(TRACE)
    assert v.components == {"stars": 0.75, "ok": 1.0, "penalty": 0.5}
    assert v.reward == pytest.approx(0.75)
    out_of_range = Rubric([Component("stars", const(7), scale=(1, 5)), Component("ok", const(1.0))])
    v = out_of_range.score(TRACE)
    assert v.status == "error" and "outside its declared scale [1, 5]" in v.errors["stars"]
    assert v.components == {"ok": 1.0}


@pytest.mark.parametrize("metric_value", [0.0, 0.3, 1.0, True, "not a number", float("nan")])
def test_zero_weight_metrics_never_change_the_reward(metric_value) -> None:
    base = [Component("correct", const(0.6)), Component("style", const(0.2), weight=3)]
    without = Rubric(base).score(TRACE)
    with_metric = Rubric([*base, Component("length", const(metric_value), weight=0)]).score(TRACE)
    assert with_metric.reward == without.reward == pytest.approx((0.6 + 0.6) / 4)
    assert with_metric.status == "scored" and "length" not in with_metric.components
    if isinstance(metric_value, (bool, int, float)) and metric_value == metric_value:
        assert with_metric.metrics == {"length": float(metric_value)}
    else:  # a broken metric is an error on the metric alone; the reward stands
        assert "length" in with_metric.errors and with_metric.metrics == {}


def test_gates() -> None:
    rubric = Rubric([Component("formatted", const(False), weight=0, gate=True),
                     Component("correct", const(1.0))])
    v = rubric.score(TRACE)
    assert v.status == "scored" and v.reward == 0.0 and v.failed_gates == ["formatted"]
    assert v.components == {"correct": 1.0} and v.metrics == {"formatted": 0.0}
    passing = Rubric([Component("formatted", const(True), weight=0, gate=True),
                      Component("correct", const(1.0))]).score(TRACE)
    assert passing.reward == 1.0 and passing.failed_gates == []
    partial = Rubric([Component("tests", const(0.8), gate=True, pass_at=0.75),
                      Component("lint", const(0.0), weight=1)]).score(TRACE)
    assert partial.reward == pytest.approx(0.4) and partial.failed_gates == []


def test_a_raising_component_leaves_siblings_intact() -> None:
    def boom(trace, runtime):
        raise RuntimeError("grader bug")

    v = Rubric([Component("a", const(1.0)), Component("broken", boom), Component("m", const(0.25), weight=0)]
               ).score(TRACE)
    assert v.status == "error" and "broken" in v.error and "grader bug" in v.errors["broken"]
    assert v.components == {"a": 1.0} and v.metrics == {"m": 0.25}
    assert Verdict.from_dict(v.to_dict()) == v  # serialisable with the per-component errors


def test_component_exceptions_are_named_whatever_their_type() -> None:
    def bad_value(trace, runtime):
        raise ValueError("cannot parse the answer")

    def own_timeout(trace, runtime):
        raise TimeoutError("upstream test runner timed out")

    for timeout in (5.0, None):  # on a worker thread, and inline
        v = Rubric([Component("ok", const(1.0)), Component("v", bad_value, weight=0),
                    Component("t", own_timeout, weight=0)], timeout_s=timeout).score(TRACE)
        assert v.status == "scored" and v.reward == 1.0
        assert v.errors["v"].startswith("ValueError: cannot parse the answer")
        assert v.errors["t"].startswith("TimeoutError: upstream test runner timed out")


def test_a_hanging_component_is_abandoned_and_siblings_score() -> None:
    release, finished = threading.Event(), threading.Event()

    def hang(trace, runtime):
        release.wait(120)
        finished.set()
        return 1.0

    try:
        rubric = Rubric([Component("fast", const(1.0)), Component("slow", hang, weight=0, timeout_s=0.3),
                         Component("also_fast", const(0.5))], timeout_s=60)
        v = rubric.score(TRACE)
        assert not finished.is_set(), "score() waited for the hanging component"
        assert v.status == "scored" and v.reward == pytest.approx(0.75)
        assert "timed out after 0.3 s" in v.errors["slow"]
        assert v.components == {"fast": 1.0, "also_fast": 0.5}
        # a hanging *rewarded* component makes the reward unknowable: an error verdict, not a 0
        v = Rubric([Component("fast", const(1.0)), Component("slow", hang, timeout_s=0.2)]).score(TRACE)
        assert not finished.is_set()
        assert v.status == "error" and v.components == {"fast": 1.0} and "timed out" in v.errors["slow"]
    finally:
        release.set()


def test_components_get_the_trace_and_runtime() -> None:
    seen = {}

    def spy(trace, runtime):
        seen["message"], seen["runtime"] = trace.final_message(), runtime
        return 1.0

    Rubric([Component("spy", spy)]).score(TRACE, runtime="view")
    assert seen == {"message": "The answer is \\boxed{42}.", "runtime": "view"}


def test_several_rubrics_are_recorded_separately() -> None:
    rules = Rubric([Component("correct", const(1.0)), Component("short", const(0.0), weight=0)], name="rules")
    judge = Rubric([Component("judge", const(0.0))], name="judge", version="judge-v1")

    def down(trace, runtime):
        raise ConnectionError("judge server down")

    flaky = Rubric([Component("judge", down)], name="flaky")
    verdicts = score_all([rules, judge, flaky], TRACE)
    assert verdicts["rules"].reward == 1.0 and verdicts["judge"].reward == 0.0
    assert verdicts["judge"].grader == "judge@judge-v1" and verdicts["flaky"].status == "error"
    combined = MultiRubric([rules, judge, flaky], primary="rules")(TRACE, None)
    assert combined.reward == 1.0 and combined.status == "scored"
    assert combined.metrics == {"short": 0.0, "judge/reward": 0.0, "judge/judge": 0.0}
    assert "judge server down" in combined.errors["flaky/judge"]


def test_bad_rubrics_are_refused() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        Rubric([Component("a", const(1)), Component("a", const(1))])
    with pytest.raises(ValueError, match="weight > 0"):
        Rubric([Component("m", const(1), weight=0)])
    with pytest.raises(ValueError, match="high > low"):
        Component("x", const(1), scale=(1, 1))
