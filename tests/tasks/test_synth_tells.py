"""The tell rate: a grep for an operator's signature finds the old operators' bugs and not the
new ones'; curation drops tells and keeps its own output unchanged."""

from __future__ import annotations

from proofgym.tasks.synth import TaskRecord, make_patch, mutate, sites
from proofgym.tasks.synth.curate import curate, rewrite_statement
from proofgym.tasks.synth.statements import only_names_and_exceptions
from proofgym.tasks.synth.tells import ProjectSource, changed_lines, tell_rates, tells_of

MODULE = b'''\
def lookup(table, key, default):
    if key in table:
        return table[key]
    return default


def head(items, n):
    if n < 0:
        raise ValueError("n must be >= 0")
    return items[:n]


def bounded(values, low, high):
    out = []
    for v in values:
        if low <= v and v <= high:
            out.append(v)
    return out
'''
PATH = "pkg/core.py"


def _record(operator: str, index: int, report: str = "") -> TaskRecord:
    _, mutated = mutate(MODULE, operator, index)
    patch = make_patch({PATH: (MODULE, mutated)})
    return TaskRecord(f"pkg-{operator}-{index}", "pkg", "1.0", 1,
                      ({"file": PATH, "operator": operator, "index": index, "function": "f",
                        "line": 1},), 0, patch, ("tests/test_core.py::test_lookup",),
                      ("tests/test_core.py::test_head",), "t", report)


def _source() -> ProjectSource:
    return ProjectSource({PATH: MODULE})


def test_the_retired_not_wrapper_is_a_tell_and_the_opposite_comparison_is_not():
    old = [_record("invert_condition", s.index) for s in sites(MODULE, ("invert_condition",))]
    new = [_record("negate_condition", s.index) for s in sites(MODULE, ("negate_condition",))]
    assert old and new
    # "not (" occurs once in the buggy module: on the bug's line
    assert all(tells_of(r, _source()) == ["invert_condition"] for r in old)
    # "<" -> ">=": the token occurs all over the module
    assert not any(tells_of(r, _source()) for r in new)
    rates = tell_rates(old + new, lambda _: _source())
    assert rates["operators"]["invert_condition"]["rate"] == 1.0
    assert rates["operators"]["negate_condition"]["rate"] == 0.0
    assert rates["rate"] == round(len(old) / (len(old) + len(new)), 4)


def test_a_real_fix_of_an_earlier_release_counts_without_the_pinned_source():
    # a release-history task of an earlier release: its patch is against that release's file,
    # which the pinned release changed since (stats --tells raised "the patch expects ...")
    older = MODULE.replace(b"if n < 0:", b"if n < 1:")
    patch = make_patch({PATH: (older, older.replace(b"return items[:n]", b"return items[:n + 1]"))})
    record = TaskRecord("pkg-rel", "pkg", "0.9", 1, ({"file": PATH, "operator": "release_fix",
                                                      "index": 0, "function": "head", "line": 10},),
                        0, patch, ("tests/test_core.py::test_head",), (), "t", "r",
                        origin="release 0.8->0.9")
    assert tells_of(record, _source()) == []
    assert tell_rates([record], lambda _: _source())["operators"]["release_fix"]["rate"] == 0.0


def test_changed_lines_of_a_deletion_are_the_lines_around_the_gap():
    patch = make_patch({PATH: (MODULE, MODULE.replace(b"            out.append(v)\n", b""))})
    # line 17 (the append) is gone: the patched file's lines 16 (the if) and 17 meet there
    assert changed_lines(patch) == {PATH: {16, 17}}


def test_curation_drops_tells_and_rewrites_template_reports_and_is_rerunnable():
    template = ("# pkg: lookup is broken\n\nAfter a recent change, 1 of the project's tests fail "
                "while 1 others still pass. The failing behaviour:\n\n- `test_lookup`: lookup; "
                "fails with AssertionError\n")
    tell = _record("invert_condition", 0, template)
    fine = _record("negate_condition", 0, template)
    assert only_names_and_exceptions(fine.bug_report, fine.bugs)
    result = curate([tell, fine], lambda _: _source())
    assert result.dropped == {"tell": [tell.id]} and [r.id for r in result.kept] == [fine.id]
    kept = result.kept[0]
    # the template kept no value: the rewrite names the API, never the test (`tasks restate`
    # re-runs the failing tests for the values)
    assert "`f`" in kept.title and kept.provenance["statement"]["writer"] == "offline"
    assert "test_lookup" not in kept.bug_report and only_names_and_exceptions(kept.bug_report)
    again = curate(result.kept, lambda _: _source())
    assert [r.to_dict() for r in again.kept] == [r.to_dict() for r in result.kept]
    assert rewrite_statement(kept) == kept
