"""Public sandboxed grading: run pytest, or any program, in a fresh sandbox over a task's files.

Both functions build a *new* sandbox for every call (no network, the unprivileged sandbox
user, the seccomp filter, the resource limits of :class:`SandboxLimits`) over the read-only
``snapshot`` plus the artifact's ``changes`` plus the grader's ``hidden`` files. Changes to
``protected`` paths (and to any pytest configuration file, ``conftest.py``,
``sitecustomize.py``) are dropped, so those files are exactly the snapshot's; hidden files
exist only in that grading sandbox, never in the agent's.

* :func:`run_pytest` runs the named tests, each alone in a forked process, plus a mutant of each
  hidden test for tamper detection (:mod:`proofgym.verify.mutants`), and returns a
  :class:`TestRun` with each test's outcome and failure message.
* :func:`run_program` runs one command (a program to judge by its output or exit code, or a
  test command) and returns a :class:`ProgramRun`.

Whatever the artifact or the code under test does ends in the result object (a scored 0 for
the task to give). Only faults of the host raise :class:`SandboxSetupError`.
"""

from __future__ import annotations

import os
import selectors
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proofgym.runtimes.sandbox import SandboxLimits, SandboxSetupError
from proofgym.runtimes.sandbox.system import PYTEST_PACKAGES
from proofgym.verify.grading_workspace import (
    DEFAULT_PROTECTED,
    ArtifactRejected,
    check_artifact,
    grading_sandbox,
    kill_sandbox,
    split_changes,
)
from proofgym.verify.sandboxed import TestRun, run_tests_isolated

__all__ = ["DEFAULT_PROTECTED", "ProgramRun", "SandboxSetupError", "TestRun", "run_program",
           "run_pytest"]

#: Output of a program kept per stream (the rest is counted, not kept).
MAX_PROGRAM_OUTPUT = 1 << 20


def _snapshot_dir(snapshot: Any) -> Path:
    """A directory for ``snapshot``: a path as given; other sources (a mapping of files, a
    ``.tar``/zip) through ``proofgym.runtimes.sandbox.snapshot_source`` where it exists."""
    if isinstance(snapshot, (str, os.PathLike)) and Path(snapshot).is_dir():
        return Path(snapshot).resolve()
    try:
        from proofgym.runtimes.sandbox.snapshot_source import materialize
    except ImportError:
        raise TypeError(f"snapshot must be a directory; got {snapshot!r}") from None
    return Path(materialize(snapshot)).resolve()


def run_pytest(snapshot: Any, changes: Mapping[str, bytes | None], *, tests: Sequence[str],
               hidden: Mapping[str, bytes] | None = None,
               protected: Sequence[str] = DEFAULT_PROTECTED, timeout_s: float = 120.0,
               test_timeout_s: float | None = None, mutants: bool = True,
               limits: SandboxLimits | None = None,
               packages: Sequence[str] = PYTEST_PACKAGES,
               max_artifact_bytes: int | None = None) -> TestRun:
    """Run the pytest tests ``tests`` (``file::[Class::]name`` or whole files) in a fresh
    sandbox over ``snapshot`` + allowed ``changes`` + ``hidden``.

    ``timeout_s`` bounds the whole test run, ``test_timeout_s`` each test (a test past it stops
    the run: ``failure="tests_timed_out"``). With ``mutants`` each test of a hidden file runs
    with a mutant of itself; one that passes with its test is ``failure="tampering_detected"``.
    ``TestRun.results`` maps each test id to its outcome and ``TestRun.messages`` each test that
    did not pass to the tail of its failure report.
    """
    return run_tests_isolated(_snapshot_dir(snapshot), changes, tests=tests, hidden=hidden,
                              protected=protected, timeout_s=timeout_s,
                              test_timeout_s=test_timeout_s, limits=limits, packages=packages,
                              mutants=mutants, max_artifact_bytes=max_artifact_bytes)


@dataclass(frozen=True)
class ProgramRun:
    """The outcome of :func:`run_program`.

    ``exit_code`` is the program's (``None`` if it did not run or was killed at the time
    limit: ``timed_out``); ``stdout``/``stderr`` hold at most :data:`MAX_PROGRAM_OUTPUT` bytes
    each (``truncated`` says more was written). ``failure`` is ``"artifact_rejected"`` (with
    ``detail``) when the changes could not be applied, ``"timed_out"`` past the time limit,
    else ``None``. ``dropped`` lists the changes left out (protected or unsafe paths).
    """

    exit_code: int | None
    stdout: bytes
    stderr: bytes
    timed_out: bool = False
    truncated: bool = False
    failure: str | None = None
    detail: str | None = None
    dropped: tuple[str, ...] = ()
    timings: Mapping[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """The program ran to completion and exited 0."""
        return self.failure is None and self.exit_code == 0

    @property
    def stdout_text(self) -> str:
        return self.stdout.decode("utf-8", errors="replace")

    @property
    def stderr_text(self) -> str:
        return self.stderr.decode("utf-8", errors="replace")


def run_program(snapshot: Any, changes: Mapping[str, bytes | None], *, argv: Sequence[str],
                stdin: bytes | None = None, hidden: Mapping[str, bytes] | None = None,
                protected: Sequence[str] = DEFAULT_PROTECTED, timeout_s: float = 60.0,
                limits: SandboxLimits | None = None, packages: Sequence[str] = (),
                max_artifact_bytes: int | None = None) -> ProgramRun:
    """Run ``argv`` (in ``/workspace``; ``python3`` is the sandbox's interpreter, with
    ``packages`` importable) in a fresh sandbox over ``snapshot`` + allowed ``changes`` +
    ``hidden``, feeding it ``stdin``; stopped after ``timeout_s``.
    """
    if not argv or not all(isinstance(a, str) for a in argv):
        raise TypeError(f"argv must be a non-empty list of strings; got {argv!r}")
    t0 = time.perf_counter()
    root = _snapshot_dir(snapshot)
    limits = limits or SandboxLimits()
    allowed, dropped = split_changes(changes, protected)
    budget = max_artifact_bytes if max_artifact_bytes is not None else (limits.workspace_mb << 20) // 2
    problem = check_artifact(allowed, max_bytes=budget)
    if problem is not None:
        return _rejected(f"the artifact cannot be applied: {problem}", dropped, t0)
    try:
        with grading_sandbox(root, allowed, dict(hidden or {}), command=argv, limits=limits,
                             packages=packages, stdin=subprocess.PIPE if stdin else
                             subprocess.DEVNULL, stderr=subprocess.PIPE) as proc:
            t1 = time.perf_counter()
            out, err, truncated, timed_out = _communicate(proc, stdin or b"", timeout_s)
            t2 = time.perf_counter()
            exit_code = None if timed_out else proc.returncode
    except ArtifactRejected as exc:
        return _rejected(str(exc), dropped, t0)
    timings = {"prepare_s": t1 - t0, "run_s": t2 - t1, "total_s": time.perf_counter() - t0}
    return ProgramRun(exit_code, out, err, timed_out=timed_out, truncated=truncated,
                      failure="timed_out" if timed_out else None,
                      detail=f"the program ran past its time limit of {timeout_s} s"
                      if timed_out else None, dropped=tuple(sorted(dropped)), timings=timings)


def _rejected(reason: str, dropped: Sequence[str], t0: float) -> ProgramRun:
    return ProgramRun(None, b"", b"", failure="artifact_rejected", detail=reason,
                      dropped=tuple(sorted(dropped)),
                      timings={"total_s": time.perf_counter() - t0})


def _communicate(proc: subprocess.Popen[bytes], data: bytes,
                 timeout_s: float) -> tuple[bytes, bytes, bool, bool]:
    """Feed ``data``, read both streams (keeping the first bytes of each) until they close and
    the program exits, or the time runs out (then kill it)."""
    assert proc.stdout is not None and proc.stderr is not None
    sel = selectors.DefaultSelector()
    kept = {"out": bytearray(), "err": bytearray()}
    sel.register(proc.stdout, selectors.EVENT_READ, "out")
    sel.register(proc.stderr, selectors.EVENT_READ, "err")
    view = memoryview(data)
    if proc.stdin is not None:
        os.set_blocking(proc.stdin.fileno(), False)
        sel.register(proc.stdin, selectors.EVENT_WRITE, "in")
    truncated = timed_out = False
    deadline = time.monotonic() + timeout_s
    while sel.get_map():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            timed_out = True
            break
        for key, _ in sel.select(remaining):
            if key.data == "in":
                try:
                    view = view[os.write(key.fd, view[:1 << 16]):]
                except (BrokenPipeError, BlockingIOError) as exc:
                    if isinstance(exc, BrokenPipeError):  # the program stopped reading
                        view = view[:0]
                if not view:
                    sel.unregister(key.fileobj)
                    key.fileobj.close()  # type: ignore[union-attr]
                continue
            chunk = os.read(key.fd, 1 << 16)
            if not chunk:
                sel.unregister(key.fileobj)
                continue
            buf = kept[key.data]
            room = MAX_PROGRAM_OUTPUT - len(buf)
            truncated |= len(chunk) > room
            buf += chunk[:max(room, 0)]
    sel.close()
    if not timed_out:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
    if timed_out:
        kill_sandbox(proc)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None and not stream.closed:
            stream.close()
    if proc.returncode is None:
        raise SandboxSetupError("the grading sandbox's process did not exit after being killed")
    return bytes(kept["out"]), bytes(kept["err"]), truncated, timed_out
