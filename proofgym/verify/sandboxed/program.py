"""Public sandboxed grading: run pytest, or any program, in a fresh sandbox over a task's files.

Both functions build a *new* sandbox for every call (no network, the unprivileged sandbox
user, the seccomp filter, the resource limits of :class:`SandboxLimits`) over the read-only
``snapshot`` plus the artifact's ``changes`` plus the grader's ``hidden`` files. Changes to
``protected`` paths (and to any pytest configuration file, ``conftest.py``,
``sitecustomize.py``) are dropped, so those files are exactly the snapshot's; hidden files
exist only in that grading sandbox, never in the agent's.

* :func:`run_pytest` runs the named tests, each alone in a forked process, plus a mutant of each
  hidden test for tamper detection (:mod:`proofgym.verify.sandboxed.mutants`), and returns a
  :class:`TestRun` with each test's outcome and failure message.
* :func:`run_program` runs one command (a program to judge by its output, or a check program)
  and returns a :class:`ProgramRun`. An exit status is what the program *says*, and code it runs
  can say 0 (``os._exit(0)``); with ``proof=True`` a Python program runs under a grader epilogue
  and ``ProgramRun.finished`` says the trusted side saw it run to its last statement.

Whatever the artifact or the code under test does ends in the result object (a scored 0 for
the task to give). Only faults of the host raise :class:`SandboxSetupError`.
"""

from __future__ import annotations

import os
import selectors
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proofgym.core.errors import ConfigError
from proofgym.runtimes import program_files
from proofgym.runtimes.grading_lease import hidden_key_of
from proofgym.runtimes.sandbox import PYTEST_PACKAGES, SandboxLimits, SandboxSetupError, SandboxSystem
from proofgym.verify.sandboxed.isolated import TestRun, run_tests_isolated
from proofgym.verify.sandboxed.protocol import ProgramProof
from proofgym.verify.sandboxed.workspace import (
    DEFAULT_PROTECTED,
    ArtifactRejected,
    check_artifact,
    grading_sandbox,
    kill_sandbox,
    split_changes,
)

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
        from proofgym.runtimes.sandbox import materialize
    except ImportError:
        raise ConfigError(f"snapshot must be a directory; got {snapshot!r}") from None
    return Path(materialize(snapshot)).resolve()


def run_pytest(snapshot: Any, changes: Mapping[str, bytes | None], *, tests: Sequence[str],
               hidden: Mapping[str, bytes] | None = None,
               protected: Sequence[str] = DEFAULT_PROTECTED, timeout_s: float = 120.0,
               test_timeout_s: float | None = None, mutants: bool = True,
               limits: SandboxLimits | None = None,
               packages: Sequence[str] = PYTEST_PACKAGES,
               max_artifact_bytes: int | None = None,
               image: SandboxSystem | None = None, batch: Sequence[str] = (),
               unwithheld: Mapping[str, Sequence[str]] | None = None) -> TestRun:
    """Run the pytest tests ``tests`` (``file::[Class::]name`` or whole files) in a fresh
    sandbox over ``snapshot`` + allowed ``changes`` + ``hidden``; those of ``batch`` (visible
    ones) together in one process (see :func:`run_tests_isolated`).

    ``timeout_s`` bounds the whole test run, ``test_timeout_s`` each test (a test past it stops
    the run: ``failure="tests_timed_out"``). With ``mutants`` each test of a hidden file runs
    with a mutant of itself; one that passes with its test is ``failure="tampering_detected"``.
    ``TestRun.results`` maps each test id to its outcome and ``TestRun.messages`` each test that
    did not pass to the tail of its failure report. ``image``: the environment image the
    sandbox runs on (default: the minimal system with ``packages``). ``unwithheld``: hidden
    test id -> its checks that stay asserts (see :func:`run_tests_isolated`).
    """
    return run_tests_isolated(_snapshot_dir(snapshot), changes, tests=tests, hidden=hidden,
                              protected=protected, timeout_s=timeout_s,
                              test_timeout_s=test_timeout_s, limits=limits, packages=packages,
                              mutants=mutants, max_artifact_bytes=max_artifact_bytes,
                              image=image, batch=batch, unwithheld=unwithheld)


@dataclass(frozen=True)
class ProgramRun:
    """The outcome of :func:`run_program`.

    ``exit_code`` is the program's (``None`` if it did not run or was killed at the time
    limit: ``timed_out``); ``stdout``/``stderr`` hold at most :data:`MAX_PROGRAM_OUTPUT` bytes
    each (``truncated`` says more was written). ``failure`` is ``"artifact_rejected"`` (with
    ``detail``) when the changes could not be applied, ``"timed_out"`` past the time limit,
    else ``None``. ``dropped`` lists the changes left out (protected or unsafe paths).

    ``finished`` is ``None`` unless the run was made with ``proof=True``; then it is ``True``
    only if the program's code ran to its end and the grader's epilogue, run after it, answered
    the host's nonce: ``os._exit(0)``, ``sys.exit(0)``, an exception (however its report or exit
    status is disguised) or a killed interpreter leave it ``False``.
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
    finished: bool | None = None

    @property
    def ok(self) -> bool:
        """The program exited 0, and, when run with ``proof=True``, ran to its end
        (``finished``). Without proof this is only what the program reported: a program (or the
        artifact's code it imports) that calls ``os._exit(0)`` early is ``ok`` too, so never
        pay a check program by it; use ``proof=True``."""
        return self.failure is None and self.exit_code == 0 and self.finished is not False

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
                max_artifact_bytes: int | None = None, proof: bool = False,
                plain_values: bool = False, image: SandboxSystem | None = None) -> ProgramRun:
    """Run ``argv`` (in ``/workspace``; ``python3`` is the sandbox's interpreter, with
    ``packages`` importable) in a fresh sandbox over ``snapshot`` + allowed ``changes`` +
    ``hidden``, feeding it ``stdin``; stopped after ``timeout_s``. ``image``: the environment
    image the sandbox runs on (default: the minimal system with ``packages``).

    ``proof=True`` (``argv`` must then be ``["python3", "file.py", *args]`` or ``["python3",
    "-c", code, *args]``) runs the program under a grader epilogue: once the program's last
    statement has run, the epilogue asks the host for a fresh nonce on a socket of its own and
    answers with it, and only that sets ``ProgramRun.finished`` (and lets ``ok`` be true).
    Code that deliberately speaks this protocol itself (it runs in the same process) can forge
    it: pair the check with a mutant check that must fail, as :func:`run_pytest` does.

    ``plain_values=True`` (with ``proof``) also guards the operands of every comparison
    (``==``, ``<``, ``in``, ...) and arithmetic operation written in the program itself (not in
    modules it imports): each must be a builtin value (``int``, ``str``, ``list``, ``dict``,
    ... or a subclass that keeps their comparison and arithmetic methods), recursively through
    containers, else a ``TypeError`` stops the program, so an object that equals everything
    never passes an ``assert``. The check may call ``proofgym_plain(value)`` itself where it
    passes a value to a function (``math.isclose``).
    """
    if not argv or not all(isinstance(a, str) for a in argv):
        raise TypeError(f"argv must be a non-empty list of strings; got {argv!r}")
    if plain_values and not proof:
        raise ConfigError("plain_values=True guards a check program run with proof=True; pass both")
    if proof:
        argv = _with_epilogue(list(argv), plain_values)
    t0 = time.perf_counter()
    root = _snapshot_dir(snapshot)
    limits = limits or SandboxLimits()
    allowed, dropped = split_changes(changes, protected)
    budget = max_artifact_bytes if max_artifact_bytes is not None else (limits.workspace_mb << 20) // 2
    problem = check_artifact(allowed, max_bytes=budget)
    if problem is not None:
        return _rejected(f"the artifact cannot be applied: {problem}", dropped, t0)
    ours = theirs = None
    if proof:
        ours, theirs = socket.socketpair()
        argv[3] = str(theirs.fileno())
    try:
        with grading_sandbox(root, allowed, dict(hidden or {}), command=argv, limits=limits,
                             packages=packages, image=image,
                             hidden_key=hidden_key_of(hidden, root) if hidden else None,
                             stdin=subprocess.PIPE if stdin else
                             subprocess.DEVNULL, stderr=subprocess.PIPE,
                             pass_fds=(theirs.fileno(),) if theirs is not None else ()) as proc:
            if theirs is not None:
                theirs.close()  # the sandbox holds its copy: the host keeps only its own end
            t1 = time.perf_counter()
            out, err, truncated, timed_out, finished = _communicate(proc, stdin or b"",
                                                                    timeout_s, ours)
            t2 = time.perf_counter()
            exit_code = None if timed_out else proc.returncode
    except ArtifactRejected as exc:
        return _rejected(str(exc), dropped, t0)
    finally:
        for end in (ours, theirs):
            if end is not None:
                end.close()
    timings = {"prepare_s": t1 - t0, "run_s": t2 - t1, "total_s": time.perf_counter() - t0}
    return ProgramRun(exit_code, out, err, timed_out=timed_out, truncated=truncated,
                      failure="timed_out" if timed_out else None,
                      detail=f"the program ran past its time limit of {timeout_s} s"
                      if timed_out else None, dropped=tuple(sorted(dropped)), timings=timings,
                      finished=(finished and not timed_out) if proof else None)


#: The grader's epilogue (``proofgym/programs/epilogue.py``): runs the program (a file or ``-c``
#: code) as ``__main__`` and, only if its last statement ran, proves it on the socket (the
#: pytest runner's ``_prove`` protocol). argv: fd, plain (0/1), ``-c`` or ``file``, the code or
#: path, the program's own arguments.
_EPILOGUE = program_files.source("epilogue").decode()


def _with_epilogue(argv: list[str], plain: bool) -> list[str]:
    """``argv`` run under the grader's epilogue (the fd, ``argv[3]``, is filled in later)."""
    if argv[0] not in ("python3", "python") or len(argv) < 2 or \
            (argv[1] == "-c" and len(argv) < 3) or (argv[1] != "-c" and argv[1].startswith("-")):
        raise ConfigError("proof=True runs a Python program: argv must be ['python3', 'file.py', "
                          f"*args] or ['python3', '-c', code, *args]; got {argv!r}")
    if argv[1] == "-c":
        mode, target, rest = "-c", argv[2], argv[3:]
    else:
        mode, target, rest = "file", argv[1], argv[2:]
    return ["python3", "-c", _EPILOGUE, "", "1" if plain else "0", mode, target, *rest]


def _rejected(reason: str, dropped: Sequence[str], t0: float) -> ProgramRun:
    return ProgramRun(None, b"", b"", failure="artifact_rejected", detail=reason,
                      dropped=tuple(sorted(dropped)),
                      timings={"total_s": time.perf_counter() - t0})


def _communicate(proc: subprocess.Popen[bytes], data: bytes, timeout_s: float,
                 ctl: socket.socket | None = None) -> tuple[bytes, bytes, bool, bool, bool]:
    """Feed ``data``, read both streams (keeping the first bytes of each) until they close and
    the program exits, or the time runs out (then kill it); answer the epilogue's proof on
    ``ctl``. The last value says whether the proof came, with the right nonce."""
    assert proc.stdout is not None and proc.stderr is not None
    sel = selectors.DefaultSelector()
    kept = {"out": bytearray(), "err": bytearray()}
    sel.register(proc.stdout, selectors.EVENT_READ, "out")
    sel.register(proc.stderr, selectors.EVENT_READ, "err")
    proof = None
    if ctl is not None:
        ctl.setblocking(False)
        proof = ProgramProof(ctl)
        sel.register(ctl, selectors.EVENT_READ, "proof")
    view = memoryview(data)
    if proc.stdin is not None:
        os.set_blocking(proc.stdin.fileno(), False)
        sel.register(proc.stdin, selectors.EVENT_WRITE, "in")
    truncated = timed_out = False
    deadline = time.monotonic() + timeout_s
    # the output streams decide the end; the proof socket is read while they are open
    while any(k.data in ("out", "err", "in") for k in sel.get_map().values()):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            timed_out = True
            break
        for key, _ in sel.select(remaining):
            if key.data == "proof":
                if proof is not None and proof.feed() == "end":
                    sel.unregister(key.fileobj)
                continue
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
    if proof is not None:
        while proof.feed() == "more":
            pass  # what the epilogue wrote before the program exited is in the socket already
    finished = proof is not None and proof.outcome() == "passed"
    return bytes(kept["out"]), bytes(kept["err"]), truncated, timed_out, finished
