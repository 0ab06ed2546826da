import pytest

from spans import Interval, covered_length, merge


def test_overlapping_intervals_merge():
    assert merge([(1, 4), (2, 6)]) == [Interval(1, 6)]


def test_disjoint_intervals_stay_apart_and_sorted():
    assert merge([(10, 12), (1, 2)]) == [Interval(1, 2), Interval(10, 12)]


def test_contained_interval():
    assert merge([(1, 10), (2, 3)]) == [Interval(1, 10)]


def test_empty_input():
    assert merge([]) == []


def test_invalid_interval():
    with pytest.raises(ValueError):
        merge([(5, 1)])


def test_overlaps_includes_shared_end_point():
    assert Interval(1, 3).overlaps(Interval(3, 5))


def test_covered_length_of_overlapping():
    assert covered_length([(0, 2), (1, 3)]) == 3


def test_touching_intervals_merge():
    assert merge([(1, 3), (3, 5)]) == [Interval(1, 5)]
