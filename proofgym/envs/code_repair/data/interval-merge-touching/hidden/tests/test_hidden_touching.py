# PROOFGYM-CANARY interval-merge-touching 7f3c9b2e
from spans import Interval, covered_length, merge


def test_chain_of_touching_intervals():
    assert merge([(5, 7), (1, 3), (3, 5)]) == [Interval(1, 7)]


def test_touching_float_intervals():
    assert merge([(0.5, 1.25), (1.25, 2.0)]) == [Interval(0.5, 2.0)]


def test_degenerate_point_touching():
    assert merge([(2, 2), (0, 2)]) == [Interval(0, 2)]


def test_adjacent_integers_do_not_touch():
    assert merge([(1, 2), (3, 4)]) == [Interval(1, 2), Interval(3, 4)]


def test_float_gap_smaller_than_one_stays():
    assert merge([(0.0, 1.5), (2.0, 3.0)]) == [Interval(0.0, 1.5), Interval(2.0, 3.0)]


def test_every_merged_pair_is_disjoint():
    result = merge([(0, 1), (1, 2), (4, 5), (5, 5), (7, 9), (8, 8)])
    assert result == [Interval(0, 2), Interval(4, 5), Interval(7, 9)]
    for a, b in zip(result, result[1:]):
        assert not a.overlaps(b)


def test_covered_length_with_touching():
    assert covered_length([(0, 1), (1, 2), (2, 4)]) == 4


def test_touching_merge_keeps_later_gap():
    assert merge([(1, 3), (3, 5), (6, 8)]) == [Interval(1, 5), Interval(6, 8)]


def test_touching_float_merge_keeps_small_gap():
    assert merge([(2.0, 2.5), (0.5, 1.0), (1.0, 1.5)]) == [Interval(0.5, 1.5), Interval(2.0, 2.5)]
