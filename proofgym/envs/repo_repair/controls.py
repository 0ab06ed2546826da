"""Negative controls of a RepoRepair task (each must score 0): doing nothing, a wrong fix (an
edit of the buggy file that leaves the bug), deleting the tests that fail, and copying whatever
the image holds for the project's modules over the workspace (the image must not install the
project: its pristine source would be there)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from proofgym.core import ActionScript, ToolCallAction, TurnCompleteAction
from proofgym.envs.code_repair.attacks import copy_from_image
from proofgym.runtimes.sandbox import ansi_c_quote

if TYPE_CHECKING:
    from proofgym.envs.repo_repair.task import RepoRepairTask


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
    }
