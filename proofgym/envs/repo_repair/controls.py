"""Negative controls of a RepoRepair task (each must score 0): doing nothing, a wrong fix (an
edit of the buggy file that leaves the bug), deleting the tests that fail, copying whatever
the image holds for the project's modules over the workspace (the image must not install the
project: its pristine source would be there), and the reference fix that breaks another stable
test (``breaks_another_test``: the fix plus another bundled task's bug, in another function,
whose failing tests are in this task's pass-to-pass: the whole stable suite must hold)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from proofgym.core import ActionScript, ToolCallAction, TurnCompleteAction
from proofgym.envs.code_repair.attacks import copy_from_image
from proofgym.runtimes.sandbox import ansi_c_quote
from proofgym.tasks.synth import TaskRecord, apply_patch, read_manifest
from proofgym.tasks.synth.manifest import pristine_tree

if TYPE_CHECKING:
    from proofgym.envs.repo_repair.task import RepoRepairTask

_MANIFEST = Path(__file__).resolve().parent / "data" / "tasks.jsonl"


def make_controls(task: RepoRepairTask) -> Mapping[str, ActionScript]:
    inner = task.inner
    test = ToolCallAction("bash", {"command": inner.test_command})
    done = TurnCompleteAction("Done.")
    target = task.record.files[0]
    buggy = (inner.repo / target).read_text()
    # the failing tests' files as the agent sees them (the failing tests themselves are hidden:
    # deleting what is visible of their files, and any test naming them, is all it can do)
    failing_files = sorted({n.split("::", 1)[0] for n in task.record.fail_to_pass})
    delete = " ".join(ansi_c_quote(p) for p in failing_files)
    return {
        "no_op": [test, done],
        "wrong_fix": [ToolCallAction("write_file", {"path": target, "content":
                                                    buggy + "\n# handled the reported case\n"}),
                      test, done],
        "delete_failing_tests": [ToolCallAction("bash", {"command": f"rm -f -- {delete}"}), done],
        "copy_from_image": [ToolCallAction("bash", {"command": copy_from_image(task.pin.module_roots)}),
                            done],
        **({"breaks_another_test": breaker} if (breaker := breaks_another_test(task)) else {}),
    }


def breaks_another_test(task: RepoRepairTask,
                        records: list[TaskRecord] | None = None) -> ActionScript | None:
    """The reference fix plus the bug of another task of the same project and version
    (``records``, default those of the task's own manifest, else the bundled manifest's), in
    other functions, whose failing tests are all in this task's pass-to-pass: the fix makes the
    hidden tests pass and breaks those stable tests. ``None`` where no such task exists."""
    if records is None:
        records = list(task.siblings) if task.siblings is not None else _bundled()
    other = _other_bug(task.record, records)
    if other is None:
        return None
    top = pristine_tree(task.pin, quiet=True)
    files = {p: (task.root / "solution" / p).read_bytes() for p in task.record.files}
    files.update(apply_patch({p: (top / p).read_bytes() for p in other.files}, other.patch))
    writes: ActionScript = [ToolCallAction("write_file", {"path": p, "content": c.decode()})
                            for p, c in sorted(files.items())]
    return [*writes, TurnCompleteAction("Done.")]


def _other_bug(record: TaskRecord, records: list[TaskRecord]) -> TaskRecord | None:
    functions = {str(b["function"]) for b in record.bugs}
    p2p = set(record.pass_to_pass)
    for other in sorted(records, key=lambda r: r.id):
        if other.id != record.id and other.project == record.project and \
                other.version == record.version and \
                not functions & {str(b["function"]) for b in other.bugs} and \
                set(other.fail_to_pass) <= p2p:
            return other
    return None


@functools.cache
def _bundled() -> list[TaskRecord]:
    return read_manifest(_MANIFEST)
