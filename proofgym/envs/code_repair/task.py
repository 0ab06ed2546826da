"""A code-repair task: a small Python project with a bug, an issue, visible and hidden tests."""

from __future__ import annotations

import difflib
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import orjson

from proofgym.core import ActionScript, Task, TaskSpec, ToolCallAction, Trace, TurnCompleteAction, Verdict
from proofgym.core.errors import ConfigError, TaskRecordError, UngradableTask
from proofgym.envs.code_repair.controls import make_controls
from proofgym.runtimes.grading_lease import hidden_key_of
from proofgym.verify.sandboxed import TestRun, files_under, run_pytest, swebench_verdict

INSTRUCTIONS = """\
You are working in a Python repository at /workspace (your shell starts there). Fix the bug \
described in the issue above by changing the project's source code. You have the tools bash, \
read_file, write_file, str_replace and list_dir; there is no network. Run the visible tests with \
`{test_command}`. Do not edit or delete the tests or the test configuration: your fix is graded \
with the original tests plus hidden tests in a separate, fresh sandbox. When you are done, reply \
with a short summary of the fix."""

REQUIRED = ("id", "issue", "test_command", "fail_to_pass", "pass_to_pass")


@dataclass(frozen=True, eq=False)
class CodeRepairTask(Task):
    """One task directory (``task.json``, ``repo/``, ``hidden/``, ``solution/``, optional
    ``controls/wrong_fix/``; see ``data/``). Holds no episode state.

    The agent's sandbox gets ``repo/`` only, as its read-only snapshot. ``hidden/`` is read here,
    on the grading side, and copied into the fresh grading sandbox.
    """

    root: Path
    meta: Mapping[str, Any] = field(repr=False)
    #: The test command's time limit (all tests, real and mutant; a run takes about 3 s), in the
    #: tests' own time (wall time less the time a busy host kept them off the CPUs). A whole
    #: grading takes at most this plus 20 s (the sandbox start and the report, see
    #: ``verify.sandboxed``) on a quiet host, so a verifier pool's job timeout must exceed
    #: ``grading_timeout_s + 30``; on a busy host the runner lets starved tests run on to 4 times
    #: the limit, and a pool that gives up first returns a grader error, never a 0.
    grading_timeout_s: float = 30.0
    #: One test's time limit (own time, as above): a test past it stops the run (a scored 0,
    #: like the whole budget); a test the host starved past the backstop is a grader error.
    test_timeout_s: float = 10.0
    #: Content the artifact may carry into grading, in all.
    max_artifact_bytes: int = 64 << 20

    verifier_version = "code-repair-2"

    @classmethod
    def load(cls, root: str | Path) -> CodeRepairTask:
        root = Path(root).resolve()
        try:
            meta = orjson.loads((root / "task.json").read_bytes())
        except (OSError, orjson.JSONDecodeError) as exc:
            raise TaskRecordError(f"{root}: cannot read task.json ({exc})") from exc
        missing = [k for k in REQUIRED if k not in meta]
        if missing:
            raise TaskRecordError(f"{root / 'task.json'}: missing keys {missing}")
        if not (root / "repo").is_dir():
            raise TaskRecordError(f"{root}: no repo/ directory (the project the agent works on)")
        if meta["id"] != root.name:
            raise TaskRecordError(f"{root}: task.json id {meta['id']!r} differs from the directory name")
        return cls(root, meta)

    # -------------------------------------------------------------- contract
    @property
    def id(self) -> str:
        return str(self.meta["id"])

    @property
    def repo(self) -> Path:
        return self.root / "repo"

    def original_file(self, path: str) -> str | None:
        """The text of ``path`` (workspace-relative, or under ``/workspace``) as the agent's
        workspace starts, or ``None`` where it has no such file (``proofgym audit`` reads an
        episode's edits against it). A path that leaves ``repo/`` (``..``, absolute, a symbolic
        link) gives ``None``."""
        rel = path[len("/workspace/"):] if path.startswith("/workspace/") else path
        parts = [p for p in Path(rel).parts if p not in ("", ".")]
        if not parts or Path(rel).is_absolute() or ".." in parts:
            return None
        target = self.repo.joinpath(*parts)
        if target.is_symlink() or not target.is_file() or \
                not target.resolve().is_relative_to(self.repo.resolve()):
            return None
        return target.read_bytes().decode("utf-8", "replace")

    @property
    def test_command(self) -> str:
        return str(self.meta["test_command"])

    @property
    def protected(self) -> tuple[str, ...]:
        return tuple(self.meta.get("protected") or ("tests", "conftest.py", "pytest.ini",
                                                    "setup.cfg", "tox.ini", "pyproject.toml"))

    def get_spec(self) -> TaskSpec:
        prompt = f"{self.meta['issue'].rstrip()}\n\n{INSTRUCTIONS.format(test_command=self.test_command)}"
        return TaskSpec(prompt, metadata={"title": self.meta.get("title", ""),
                                          "test_command": self.test_command})

    def setup_runtime(self, runtime: Any) -> None:
        runtime.use_snapshot(self.repo)

    def verify(self, trace: Trace, runtime: Any) -> Verdict:
        artifact = getattr(runtime, "artifact", None)
        if artifact is None or artifact.runtime != "sandbox":
            raise ConfigError("CodeRepairTask grades the artifact of a SandboxRuntime episode; got "
                              f"{type(runtime).__name__} holding {getattr(artifact, 'runtime', None)!r}")
        limit = (artifact.meta or {}).get("limit_exceeded")
        if limit:  # the snapshot side stopped reading the agent's files: nothing complete to grade
            run = TestRun({}, None, False, f"the artifact exceeded a limit: {limit}", False, "",
                          failure="artifact_rejected")
        else:
            run = run_pytest(self.repo, artifact.files, tests=self.test_ids,
                             hidden=self.hidden_files, protected=self.protected,
                             timeout_s=self.grading_timeout_s, test_timeout_s=self.test_timeout_s,
                             max_artifact_bytes=self.max_artifact_bytes)
        if run.failure is None and not run.guarded:  # the task's fault, not the agent's
            raise UngradableTask(f"task {self.id}: no test has a mutant or a withheld check, so "
                                 "tampering cannot be detected; add an assert that compares with an "
                                 "expected value to at least one fail_to_pass test")
        return swebench_verdict(run, self.meta["fail_to_pass"], self.meta["pass_to_pass"])

    @cached_property
    def hidden_files(self) -> dict[str, bytes]:
        return files_under(self.root / "hidden")

    @cached_property
    def hidden_key(self) -> str:  # type: ignore[override]
        return hidden_key_of(self.hidden_files, self.repo)

    @cached_property
    def solution_files(self) -> dict[str, bytes]:
        return files_under(self.root / "solution")

    @property
    def test_ids(self) -> list[str]:
        return [*self.meta["fail_to_pass"], *self.meta["pass_to_pass"]]

    @property
    def test_files(self) -> list[str]:
        nodes = [*self.meta["fail_to_pass"], *self.meta["pass_to_pass"]]
        return sorted({n.split("::", 1)[0] for n in nodes})

    def content(self) -> Mapping[str, Any]:
        digest = hashlib.sha256()
        for sub in ("repo", "hidden", "solution"):
            for path, data in files_under(self.root / sub).items():
                digest.update(f"{sub}/{path}\0".encode() + hashlib.sha256(data).digest())
        return {"id": self.id, "task": dict(self.meta), "files": digest.hexdigest()}

    # ----------------------------------------------------- reference, controls
    def reference_solution(self) -> ActionScript:
        """Read, edit (``str_replace`` where the change is one block, else ``write_file``), run
        the visible tests, finish."""
        actions: list[Any] = [ToolCallAction("list_dir", {"path": "."})]
        for path, new in self.solution_files.items():
            old_file = self.repo / path
            actions.append(ToolCallAction("read_file", {"path": path}) if old_file.is_file()
                           else ToolCallAction("list_dir", {"path": str(Path(path).parent)}))
            actions.append(_edit(path, old_file.read_bytes() if old_file.is_file() else None, new))
        actions.append(ToolCallAction("bash", {"command": self.test_command}))
        actions.append(TurnCompleteAction(f"Fixed: {self.meta.get('title', self.id)}. "
                                          "The visible tests pass."))
        return actions

    def controls(self) -> Mapping[str, ActionScript]:
        return make_controls(self)


def _edit(path: str, old: bytes | None, new: bytes) -> ToolCallAction:
    """One ``str_replace`` covering the changed lines when that block is unique, else a write."""
    if old is not None:
        try:
            a, b = old.decode().splitlines(keepends=True), new.decode().splitlines(keepends=True)
        except UnicodeDecodeError:
            a = b = []
        ops = [op for op in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes()
               if op[0] != "equal"]
        if ops:
            lo_a, hi_a = ops[0][1], ops[-1][2]
            lo_b, hi_b = ops[0][3], ops[-1][4]
            while hi_a - lo_a < 2 and (lo_a > 0 or hi_a < len(a)):  # context makes it unique
                lo_a, lo_b = max(lo_a - 1, 0), max(lo_b - 1, 0) if lo_a > 0 else lo_b
                if hi_a < len(a):
                    hi_a, hi_b = hi_a + 1, hi_b + 1
            old_block, new_block = "".join(a[lo_a:hi_a]), "".join(b[lo_b:hi_b])
            text = "".join(a)
            if old_block and text.count(old_block) == 1 and \
                    text.replace(old_block, new_block) == "".join(b):
                return ToolCallAction("str_replace", {"path": path, "old_str": old_block,
                                                      "new_str": new_block})
    return ToolCallAction("write_file", {"path": path, "content": new.decode()})
