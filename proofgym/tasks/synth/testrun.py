"""Running a project's pytest suite in a sandbox during synthesis, with per-test outcomes.

The suite runs under plain pytest in a fresh sandbox over the checkout (the host writes
nothing into it: the job, with any mutated file, arrives on stdin and the in-sandbox program
writes it). A tiny plugin records each test's outcome, its exception type and a trimmed message
and, on request, the functions of the project each test called (a profile hook: the test
selection of :mod:`.pipeline`); it writes them as JSON to a descriptor outside the workspace.
Outcomes are per test function (``file::[Class::]name``, the ids the grader runs): a
parametrized function passes only when every one of its cases passes.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proofgym.runtimes import program_files
from proofgym.runtimes.sandbox import PYTEST_PACKAGES, SandboxHome, SandboxLimits, SandboxSetupError

_PARAMS = re.compile(r"\[.*\]$")
_MAX_MESSAGE = 300

#: The program run inside the sandbox (``proofgym/programs/suite_runner.py``): argv[1] is the
#: result descriptor, the job is on stdin.
_PROGRAM = program_files.source("suite_runner").decode()


@dataclass(frozen=True)
class CallPath:
    """How a test reached a watched function: the qualified names of the project's frames from
    the one the test called (``path[0]``, with the ``args`` it got, shortened reprs) down to
    the watched one, and each frame's file."""

    path: tuple[str, ...]
    modules: tuple[str, ...]
    args: tuple[str, ...]


@dataclass(frozen=True)
class TestOutcome:
    outcome: str  # passed, failed, error, skipped
    exception: str | None = None
    message: str | None = None
    #: with ``watch``: how the test first reached a watched function (``None``: it did not)
    reached: CallPath | None = None


@dataclass(frozen=True)
class SuiteRun:
    """One run of (part of) a suite: per test function its outcome; with tracing, per test the
    project functions it called (``path:first_line:name``) and those called outside any test
    (at import or collection)."""

    results: Mapping[str, TestOutcome]
    calls: Mapping[str, frozenset[str]] = field(default_factory=dict)
    collect: frozenset[str] = frozenset()
    exit_code: int | None = None
    seconds: float = 0.0
    output: str = ""
    #: test functions pytest ran as several items (parameters): the grader runs all the cases
    #: of a ``parametrize``-decorated one in one process; the others (a parametrized fixture)
    #: never become a task's tests
    parametrized: frozenset[str] = frozenset()


def function_id(node_id: str) -> str:
    """A pytest node id without its parameters: the id of the test function."""
    return _PARAMS.sub("", node_id)


def _aggregate(raw: Mapping[str, Mapping[str, str]],
               paths: Mapping[str, Mapping[str, Any]]) -> dict[str, TestOutcome]:
    rank = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}
    out: dict[str, TestOutcome] = {}
    for node, entry in raw.items():
        key = function_id(node)
        seen = paths.get(node)
        reached = CallPath(tuple(seen["path"]), tuple(seen["modules"]), tuple(seen["args"])) \
            if seen else None
        new = TestOutcome(entry["outcome"], entry.get("exception"),
                          (entry.get("message") or "")[:_MAX_MESSAGE] or None, reached)
        old = out.get(key)
        if old is None or rank[new.outcome] > rank[old.outcome]:
            out[key] = new
    return out


class SuiteRunner:
    """Runs a checkout's suite in fresh sandboxes, one after another (one home reused)."""

    def __init__(self, checkout: Path, *, test_roots: Sequence[str], python_path: Sequence[str] = (),
                 packages: Sequence[str] = PYTEST_PACKAGES, image: Any = None,
                 timeout_s: float = 600.0) -> None:
        self.checkout = Path(checkout).resolve()
        self.test_roots = list(test_roots)
        # no configuration file of the project: the task's own pytest.ini (manifest.py) sets
        # nothing the run depends on either, so screening and grading see the same options
        self.config = "/dev/null"
        self.python_path = list(python_path)
        self.timeout_s = timeout_s
        limits = SandboxLimits(command_timeout_s=timeout_s, episode_time_s=timeout_s + 60,
                               memory_mb=2048, workspace_mb=512)
        self.home = SandboxHome(limits, packages=packages, prefix="proofgym-synth-", image=image)
        self.runs = 0

    def close(self) -> None:
        self.home.close()

    def __enter__(self) -> SuiteRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, tests: Sequence[str] | None = None, *, write: Mapping[str, bytes] | None = None,
            trace: bool = False, timeout_s: float | None = None) -> SuiteRun:
        """Run ``tests`` (function ids; default: the test roots) with ``write`` replacing files."""
        run = self.run_many([(write or {}, tests)], trace=trace, timeout_s=timeout_s)[0]
        if run is None:
            raise SandboxSetupError(f"the suite of {self.checkout} did not finish within "
                                    f"{timeout_s or self.timeout_s:g} s")
        return run

    def run_many(self, variants: Sequence[tuple[Mapping[str, bytes], Sequence[str] | None]], *,
                 trace: bool = False, timeout_s: float | None = None,
                 watch: Sequence[Sequence[tuple[str, str, int]]] | None = None
                 ) -> list[SuiteRun | None]:
        """Run each variant (files to write, tests to run) in one sandbox, each in a forked
        process over the pristine files (its writes are undone after it): the sandbox's start
        and pytest's import are paid once per batch. A variant past ``timeout_s`` or whose
        process died without a report is ``None``. ``watch[i]`` names functions of variant
        ``i`` as (file, name, a line of it): each test's outcome says how it first reached one
        (:class:`CallPath`)."""
        each = timeout_s or self.timeout_s
        self.runs += 1
        watch = watch or [()] * len(variants)
        job = {"variants": [{"write": {p: c.decode() for p, c in w.items()},
                             "args": list(t) if t else self.test_roots,
                             "watch": [list(x) for x in seen]}
                            for (w, t), seen in zip(variants, watch, strict=True)],
               "path": self.python_path, "test_roots": self.test_roots, "trace": trace,
               "config": self.config, "timeout_s": each}
        overlay = self.home.overlay(self.checkout, f"run{self.runs}")
        read_fd, write_fd = os.pipe()
        chunks: list[bytes] = []
        reader = threading.Thread(target=_drain, args=(read_fd, chunks), daemon=True)
        reader.start()
        try:
            spawned = self.home.boot(overlay, ["/opt/python/bin/python3", "-I", "-B", "-c",
                                               _PROGRAM, str(write_fd)],
                                     pass_fds=(write_fd,), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            os.close(write_fd)
            write_fd = -1
            try:
                out, _ = spawned.proc.communicate(json.dumps(job).encode(),
                                                  timeout=each * len(variants) + 60)
            except subprocess.TimeoutExpired:
                spawned.proc.kill()
                out, _ = spawned.proc.communicate()
            reader.join(timeout=30)
        finally:
            if write_fd >= 0:
                os.close(write_fd)
            self.home.discard(overlay)
        text = (out or b"").decode("utf-8", "replace")[-4000:]
        runs: list[SuiteRun | None] = [None] * len(variants)
        lines = b"".join(chunks).splitlines()
        if not lines and variants:
            raise SandboxSetupError(f"the suite run in {self.checkout} gave no report (exit "
                                    f"{spawned.proc.returncode}): {text[-2000:]}")
        for line in lines:
            entry = json.loads(line)
            data = entry["data"]
            if entry["status"] != "ok" or data is None:
                continue
            calls: dict[str, set[str]] = {}
            for node, keys in data["calls"].items():
                calls.setdefault(function_id(node), set()).update(keys)
            runs[entry["index"]] = SuiteRun(
                _aggregate(data["results"], data.get("paths") or {}),
                {k: frozenset(v) for k, v in calls.items()},
                frozenset(data["collect"]), data["exit"], float(entry["seconds"]), text,
                frozenset(function_id(n) for n in data["results"] if _PARAMS.search(n)))
        return runs


def _drain(fd: int, chunks: list[bytes]) -> None:
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except OSError:
            return
        if not chunk:
            return
        chunks.append(chunk)
