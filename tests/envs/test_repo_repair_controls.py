"""The ``breaks_another_test`` control of a task set's own manifest.

The control pairs a task with another task's bug of the same project and version; it looked
for that task in the bundled manifest only, so the tasks of a manifest of one's own (``proofgym
tasks synth`` on a project the bundled set does not hold: markdown 3.11.3) had no such control,
and ``validate`` never checked that their whole stable suite holds. The tasks of a manifest now
look among that manifest's records.
"""

from __future__ import annotations

import shutil

from proofgym.envs.repo_repair import MANIFEST, repo_repair_tasks
from proofgym.envs.repo_repair import controls as controls_module
from proofgym.tasks.synth.manifest import suites_path
from tests.envs.repo_repair_helpers import offline_cache


def test_a_task_of_its_own_manifest_gets_the_control_from_that_manifest(tmp_path, monkeypatch):
    offline_cache(tmp_path / "cache", monkeypatch)
    own = tmp_path / "own.jsonl"
    # a manifest of one's own: six's bundled records, and a bundled set without the project
    own.write_bytes(b"".join(line + b"\n" for line in MANIFEST.read_bytes().splitlines()
                             if b'"project":"six"' in line))
    shutil.copy(suites_path(MANIFEST), suites_path(own))
    monkeypatch.setattr(controls_module, "_bundled", lambda: [])
    tasks = list(repo_repair_tasks(own, projects=["six"], cache_root=tmp_path / "cache" / "tasks"))
    assert len(tasks) >= 2
    with_control = [t for t in tasks if "breaks_another_test" in t.controls()]
    assert len(with_control) == len(tasks), [t.id for t in tasks if t not in with_control]
