"""Bug operators: deterministic under a seed, each one a real, minimal change of a function body."""

from __future__ import annotations

import ast

import pytest

from proofgym.tasks.synth import OPERATORS, apply_patch, make_patch, mutate, sites
from proofgym.tasks.synth.operators import RETIRED
from proofgym.tasks.synth.patch import PatchError

SOURCE = b'''\
LIMIT = 3  # module level: never a site


def window(items, size=2):
    """A docstring is never dropped."""
    out = []
    if size <= 0 or not items:
        return []
    for i in range(len(items) - size + 1):
        out.append(items[i:i + size])
    total = len(out)
    while total > LIMIT and size == 1:
        total -= 1
    return out if total else None


def pick(a, b):
    if a > b:
        return True
    return max(a, b) == b


def clamp(value, low, high):
    if value < low:
        value = low
    return min(value, high)
'''


def test_every_operator_finds_a_site_and_each_mutant_is_a_valid_different_module():
    found = sites(SOURCE, tuple(OPERATORS))
    by_op = {op: [s for s in found if s.operator == op] for op in OPERATORS}
    assert not [s for s in sites(SOURCE) if s.operator in RETIRED]  # only when asked by name
    assert all(by_op.values()), {k: len(v) for k, v in by_op.items()}
    original = ast.dump(ast.parse(SOURCE))
    for site in found:
        _, mutated = mutate(SOURCE, site.operator, site.index)
        assert ast.dump(ast.parse(mutated)) != original
        # nothing at module level changes: LIMIT and the function signatures stay
        assert mutated.startswith(b"LIMIT = 3") and b"def window(items, size=2):" in mutated


def test_sites_and_mutants_are_deterministic():
    first = [(s.operator, s.index, s.edits) for s in sites(SOURCE)]
    second = [(s.operator, s.index, s.edits) for s in sites(SOURCE)]
    assert first == second and len(first) > 20
    assert mutate(SOURCE, "flip_compare", 0)[1] == mutate(SOURCE, "flip_compare", 0)[1]


@pytest.mark.parametrize(("operator", "before", "after"), [
    ("flip_compare", b"if size <= 0", b"if size < 0"),
    ("flip_boolean", b"size <= 0 or not items", b"size <= 0 and not items"),
    ("invert_condition", b"if size <= 0 or not items:", b"if not (size <= 0 or not items):"),
    ("negate_condition", b"if a > b:", b"if a <= b:"),
    ("swap_arguments", b"max(a, b)", b"max(b, a)"),
    ("change_return", b"return True", b"return False"),
])
def test_operators_change_exactly_the_named_spot(operator, before, after):
    for site in sites(SOURCE, (operator,)):
        _, mutated = mutate(SOURCE, operator, site.index)
        if after in mutated and before not in mutated:
            assert len(mutated.splitlines()) == len(SOURCE.splitlines())
            return
    raise AssertionError(f"{operator}: no site turns {before!r} into {after!r}")


def test_drop_operators_remove_whole_lines_and_never_the_docstring():
    for op in ("drop_statement", "drop_loop", "drop_condition"):
        for site in sites(SOURCE, (op,)):
            _, mutated = mutate(SOURCE, op, site.index)
            assert b'"""A docstring is never dropped."""' in mutated
            assert len(mutated.splitlines()) < len(SOURCE.splitlines())


def test_an_unknown_operator_or_site_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown bug operators"):
        sites(SOURCE, ("flip_everything",))
    with pytest.raises(ValueError, match="has no site 999"):
        mutate(SOURCE, "flip_compare", 999)


def test_a_patch_round_trips_and_refuses_a_different_source():
    _, mutated = mutate(SOURCE, "off_by_one_slice", 0)
    patch = make_patch({"pkg/mod.py": (SOURCE, mutated)})
    assert patch.startswith("--- a/pkg/mod.py\n+++ b/pkg/mod.py\n")
    assert apply_patch({"pkg/mod.py": SOURCE}, patch) == {"pkg/mod.py": mutated}
    with pytest.raises(PatchError, match="differs from the pin"):
        apply_patch({"pkg/mod.py": SOURCE.replace(b"total = len(out)", b"total = len(list(out))")}, patch)


def test_a_patch_over_two_files_applies_to_both():
    # a removed line that itself starts with "--" must not be read as the next file's header
    one = b"x = 1\n-- not a header\ny = 2\n"
    two = b"def f():\n    return 1\n"
    patch = make_patch({"a.py": (one, b"x = 1\ny = 2\n"), "b.py": (two, two.replace(b"1", b"2"))})
    assert apply_patch({"a.py": one, "b.py": two}, patch) == {
        "a.py": b"x = 1\ny = 2\n", "b.py": b"def f():\n    return 2\n"}


HUMAN = b'''\
def first_of(events, kind, limit):
    if not events:
        return None
    for event in events:
        if isinstance(event, Pong) and event.kind == kind:
            return event
    return events[:limit - 1]


def total(items, start):
    count = 0
    # skip the header row
    # (it holds the names)
    items = items[1:]
    count += len(items)

    return combine(start, count) + combine(Spam, count)
'''


def _mutants(operator: str) -> list[bytes]:
    return [mutate(HUMAN, operator, s.index)[1] for s in sites(HUMAN, (operator,))]


def _changed(mutated: bytes) -> tuple[set[bytes], set[bytes]]:
    before, after = set(HUMAN.splitlines()), set(mutated.splitlines())
    return before - after, after - before


def test_a_condition_is_negated_as_a_person_writes_it_never_by_a_not_wrapper():
    added = {line.strip() for m in _mutants("negate_condition") for line in _changed(m)[1]}
    assert b"if events:" in added  # "not x" loses its "not"
    assert not any(b"not (" in line for line in added), added
    # "a and b" would need a "not (...)" or De Morgan's rewrite: no site
    assert not any(b"isinstance" in line for line in added), added


@pytest.mark.parametrize("operator", ["off_by_one_constant", "off_by_one_slice"])
def test_constants_change_without_added_parentheses(operator):
    mutants = _mutants(operator)
    assert mutants
    for mutated in mutants:
        assert mutated.count(b"(") == HUMAN.count(b"(")
        assert b" - 0" not in mutated and b"-0" not in mutated
    assert any(b"events[:limit]" in m for m in mutants) or operator == "off_by_one_constant"


def test_return_none_only_where_the_function_already_returns_none():
    nones = [m for m in _mutants("change_return") if b"return None" in _changed(m)[1] or any(
        line.strip() == b"return None" for line in _changed(m)[1])]
    # first_of returns None elsewhere: its other returns may become None; total's may not
    assert nones and all(b"return combine(start, count)" in m for m in nones)


def test_a_dropped_statement_takes_the_comment_lines_above_it():
    dropped = [_changed(m)[0] for m in _mutants("drop_statement")]
    with_comment = [d for d in dropped if b"    items = items[1:]" in d]
    assert with_comment == [{b"    # skip the header row", b"    # (it holds the names)",
                             b"    items = items[1:]"}]


def test_arguments_are_swapped_only_between_plain_variables():
    swapped = [_changed(m)[1] for m in _mutants("swap_arguments")]
    assert swapped == [{b"    return combine(count, start) + combine(Spam, count)"}]
