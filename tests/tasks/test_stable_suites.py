"""A manifest lists each project's stable suite once; records whose pass-to-pass is that suite
(less their fail-to-pass) say so instead of copying it, and read back with the full list."""

from __future__ import annotations

import json

import pytest

from proofgym.tasks.synth import TaskRecord, read_manifest, write_manifest
from proofgym.tasks.synth.manifest import WHOLE_SUITE, StableSuite, read_suites, write_suites

SUITE = StableSuite("1.0", ("t.py::test_a", "t.py::test_b", "t.py::test_c", "u.py::test_d"))


def _record(rid: str, f2p: tuple[str, ...], p2p: tuple[str, ...], version: str = "1.0") -> TaskRecord:
    return TaskRecord(rid, "demo", version, 1, (), 0, "", f2p, p2p, "t", "r")


def test_a_record_names_the_suite_and_reads_back_whole(tmp_path):
    manifest = tmp_path / "tasks.jsonl"
    write_suites(manifest, {"demo": SUITE})
    whole = _record("demo-1", ("t.py::test_b",), ("t.py::test_a", "t.py::test_c", "u.py::test_d"))
    part = _record("demo-2", ("t.py::test_a",), ("t.py::test_b",))  # not the whole suite: kept as is
    write_manifest(manifest, [whole, part])
    raw = [json.loads(line) for line in manifest.read_text().splitlines()]
    assert [r["pass_to_pass"] for r in raw] == [WHOLE_SUITE, ["t.py::test_b"]]
    assert (tmp_path / "tasks.stable.json").is_file()
    assert read_suites(manifest) == {"demo": SUITE}
    assert read_manifest(manifest) == [whole, part]


def test_a_record_of_another_version_than_the_listed_suite_is_refused(tmp_path):
    manifest = tmp_path / "tasks.jsonl"
    write_suites(manifest, {"demo": SUITE})
    write_manifest(manifest, [_record("demo-1", ("t.py::test_b",), SUITE.pass_to_pass(["t.py::test_b"]))])
    write_suites(manifest, {"demo": StableSuite("2.0", SUITE.tests)})
    with pytest.raises(ValueError, match=r"no stable suite of demo 1\.0"):
        read_manifest(manifest)
