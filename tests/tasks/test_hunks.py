"""Hunk splitting, partial reverts and ddmin on synthetic inputs (no sandbox, no index)."""

from __future__ import annotations

import itertools
import random

import pytest

from proofgym.tasks.synth.hunks import Hunk, ddmin, revert, split_hunks

pytestmark = pytest.mark.pure

OLD = b"a = 1\nb = 2\nc = 3\nd = 4\ne = 5\nf = 6\n"
NEW = b"a = 1\nb = 20\nc = 3\nd = 4\nx = 9\ny = 9\ne = 5\n"


def test_split_gives_one_hunk_per_run_of_changed_lines():
    hunks = split_hunks("m.py", OLD, NEW)
    assert [(h.line, h.old, h.new) for h in hunks] == [
        (2, ("b = 2\n",), ("b = 20\n",)),
        (5, (), ("x = 9\n", "y = 9\n")),
        (8, ("f = 6\n",), ()),  # a deletion sits before b's line 8 (past the end)
    ]
    assert split_hunks("m.py", OLD, OLD) == []


def test_every_subset_reverts_to_a_file_between_the_two_and_all_of_them_to_the_old_one():
    hunks = split_hunks("m.py", OLD, NEW)
    assert revert({"m.py": NEW}, hunks) == {"m.py": OLD}
    assert revert({"m.py": NEW}, []) == {}
    for k in range(len(hunks) + 1):
        for subset in itertools.combinations(hunks, k):
            got = revert({"m.py": NEW}, subset).get("m.py", NEW)
            # the hunks not reverted are exactly what is left between the result and the old file
            assert {(h.old, h.new) for h in split_hunks("m.py", OLD, got)} == \
                {(h.old, h.new) for h in hunks if h not in subset}
    only_middle = revert({"m.py": NEW}, [hunks[1]])["m.py"]
    assert only_middle == b"a = 1\nb = 20\nc = 3\nd = 4\ne = 5\n"


def test_a_hunk_that_does_not_match_the_file_is_refused():
    stale = Hunk("m.py", 0, 1, ("q\n",), ("not the first line\n",))
    with pytest.raises(ValueError, match="does not match"):
        revert({"m.py": NEW}, [stale])


def _oracle(needed: set[int], calls: list[int]):
    def test(configs):
        calls.append(len(configs))
        return [needed <= set(c) for c in configs]
    return test


@pytest.mark.parametrize("size,needed", [(1, {0}), (8, {5}), (16, {3, 11}), (33, {0, 17, 32}),
                                         (40, set(range(10, 14)))])
def test_ddmin_finds_exactly_the_needed_elements(size, needed):
    calls: list[int] = []
    assert sorted(ddmin(list(range(size)), _oracle(needed, calls))) == sorted(needed)
    assert sum(calls) <= 4 * len(needed) * max(1, size).bit_length() + 4 * len(needed) ** 2 + 2


def test_ddmin_result_is_one_minimal_when_the_property_is_not_monotone():
    # holds for {1, 4} and for {2, 3} (two alternative fixes), and for any superset of them
    # that is not "2 without 3": the result must still be 1-minimal
    def holds(c):
        s = set(c)
        return ({1, 4} <= s or {2, 3} <= s) and not (2 in s and 3 not in s)
    got = ddmin(list(range(6)), lambda cs: [holds(c) for c in cs])
    assert got is not None and holds(got)
    assert all(not holds([x for x in got if x != y]) for y in got)


def test_ddmin_says_none_when_the_whole_set_does_not_show_it_and_asks_once_per_subset():
    assert ddmin([1, 2, 3], lambda cs: [False] * len(cs)) is None
    assert ddmin([], lambda cs: [True] * len(cs)) is None
    seen: list[frozenset] = []

    def test(configs):
        seen.extend(frozenset(c) for c in configs)
        return [7 in c for c in configs]
    assert ddmin(list(range(20)), test) == [7]
    assert len(seen) == len(set(seen))


def test_ddmin_on_random_sets_is_minimal_and_correct():
    rng = random.Random(0)
    for _ in range(30):
        size = rng.randint(1, 30)
        needed = set(rng.sample(range(size), rng.randint(1, min(3, size))))
        assert set(ddmin(list(range(size)), _oracle(needed, []))) == needed
