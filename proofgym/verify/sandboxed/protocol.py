"""The host's side of the grading runner's protocol, and of a check program's proof.

The runner is a program (``proofgym/programs/pytest_runner.py``, read as source, never
imported): :func:`boot_runner` starts it in a fresh grading sandbox, :func:`encode_job` and
:func:`send_job` hand it its one job, :func:`collect` reads its report and output, and
:meth:`RunnerReport.parse` reads the report once into a typed record. What the host and the
runner must agree on (the backstop, the nonce's length) is read from the program's source.
:class:`ProgramProof` is the host's end of a check program's proof (``run_program(proof=True)``).
"""

from __future__ import annotations

import json
import os
import selectors
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proofgym.runtimes import program_files
from proofgym.runtimes.sandbox import GRADING_PROTECTED_PIDS, SandboxLimits, SandboxSystem, guard_program
from proofgym.verify.sandboxed.warm_runners import Runner
from proofgym.verify.sandboxed.workspace import kill_sandbox, start_sandbox

#: The runner program's source (run as ``python -I -B -c SOURCE``).
RUNNER = program_files.source("pytest_runner").decode()
#: A test (and the whole run) may run this many times its limit in wall time while its own time
#: stays under the limit (a busy host): the runner's constant.
BACKSTOP = program_files.constant("pytest_runner", "BACKSTOP", float)
NONCE_BYTES = program_files.constant("pytest_runner", "_NONCE_BYTES", int)
MAX_REPORT = 16 << 20
_KEEP_OUTPUT = 32_768
MAX_MESSAGE = 2048
STARTUP_S = 20.0  # the host's deadline is the test budget plus this (runner start, report)
READY = b"ready\n"
_STATUSES = {"passed", "failed", "error", "skipped", "timeout", "crashed", "starved", "not_run"}
_OUTCOMES = {0: "passed", 1: "failed", 2: "error", 3: "skipped"}  # a proof's outcome byte


def boot_runner(snapshot: Path, config: str | None, limits: SandboxLimits,
                 packages: Sequence[str], image: SandboxSystem | None = None) -> Runner:
    """A fresh grading sandbox whose runner loads pytest, then waits for its job."""
    report_r, report_w = os.pipe()
    job_r, job_w = os.pipe()
    python = image.python if image is not None else "/opt/python/bin/python3"
    guard = {"protects": list(GRADING_PROTECTED_PIDS),
             "filter": guard_program(GRADING_PROTECTED_PIDS).hex()}
    argv = [python, "-I", "-B", "-c", RUNNER, str(report_w), str(job_r), config or "",
            json.dumps(guard)]
    try:
        booted = start_sandbox(snapshot, {}, {}, command=argv, limits=limits, packages=packages,
                               pass_fds=(report_w, job_r), image=image, count_own_cpu=True)
    except BaseException:
        os.close(report_r)
        os.close(job_w)
        raise
    finally:
        os.close(report_w)
        os.close(job_r)
    return Runner(booted, report_r, job_w, time.monotonic())


def encode_job(manifest: Mapping[str, object], files: Sequence[tuple[str, bytes | None]],
               tests: Mapping[str, bytes] | None = None) -> bytes:
    """The runner's job: the header's length (8 bytes), a JSON header (the manifest,
    ``[path, size or null]`` per workspace file and ``[path, size]`` per generated test file),
    then the files' bytes in order (later entries win: the grader's files come after the
    artifact's), then the generated tests' bytes. The runner writes the workspace files at once
    and each generated test file only for its own test's process."""
    tests = dict(tests or {})
    head = json.dumps({"manifest": manifest,
                       "files": [[p, None if c is None else len(c)] for p, c in files],
                       "tests": [[p, len(c)] for p, c in tests.items()]}).encode()
    return b"".join([len(head).to_bytes(8, "big"), head,
                     *(c for _, c in files if c is not None), *tests.values()])


def send_job(fd: int, job: bytes) -> None:
    """Write the job and close; a runner that died first (the host sees no report) ends it."""
    view = memoryview(job)
    try:
        while view:
            view = view[os.write(fd, view[:1 << 20]):]
    except BrokenPipeError:
        view = view[:0]
    finally:
        os.close(fd)














def collect(proc: subprocess.Popen[bytes], report_fd: int,
             timeout_s: float) -> tuple[bytes, str, bool]:
    """Read the report pipe and the output until both close or the time runs out."""
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(report_fd, selectors.EVENT_READ, "report")
    sel.register(proc.stdout, selectors.EVENT_READ, "output")
    report, output = bytearray(), bytearray()
    deadline = time.monotonic() + timeout_s
    timed_out = False
    while sel.get_map():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            timed_out = True
            kill_sandbox(proc)
            break
        for key, _ in sel.select(remaining):
            fd = key.fd if isinstance(key.fileobj, int) else key.fileobj.fileno()
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                sel.unregister(key.fileobj)
                continue
            if key.data == "report":
                if len(report) <= MAX_REPORT:
                    report += chunk
            else:
                output += chunk
                del output[:-_KEEP_OUTPUT]
    sel.close()
    if proc.poll() is None:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
            kill_sandbox(proc)
    proc.stdout.close()
    return bytes(report), output.decode("utf-8", errors="replace"), timed_out


@dataclass(frozen=True)
class RunnerReport:
    """The runner's report, read once (:meth:`parse`). ``error`` says why it is not a valid
    report of the tests that were to run (then ``results`` and ``messages`` are empty).
    ``outcome``: the report's top-level object when the runner ran no test because it could not
    prepare the workspace (``setup_error``: a host fault) or refused the artifact (``rejected``:
    a scored 0). The other fields are what a valid report carries besides its results: what each
    passed test's withheld checks observed (JSON text by generated id), the runner's seconds per
    phase (informative, never a grade), what a test process changed in the runner that it could
    not put back, and why the runner could not count its sandbox's CPU time."""

    results: Mapping[str, str] = field(default_factory=dict)
    messages: Mapping[str, str] = field(default_factory=dict)
    error: str | None = None
    outcome: Mapping[str, Any] = field(default_factory=dict)
    observed: Mapping[str, str] = field(default_factory=dict)
    phases: Mapping[str, float] = field(default_factory=dict)
    state_changed: str | None = None
    cpu_unmeasured: str | None = None

    @classmethod
    def parse(cls, data: bytes, expected: Sequence[str]) -> RunnerReport:
        """``data`` (what followed ``ready``) as the report of the tests ``expected`` (generated
        ids): one JSON object naming exactly those tests."""
        try:
            report, bad = json.loads(data), None
        except ValueError as exc:
            report, bad = None, exc
        if isinstance(report, dict) and ({"rejected", "setup_error"} & set(report)) and \
                "results" not in report:
            return cls(error="the runner ran no test", outcome=report)
        error, results, messages = _results(data, report, bad, expected)
        if error is not None:
            return cls(error=error)
        observed, phases = report.get("observed"), report.get("phases")
        changed, unmeasured = report.get("state_changed"), report.get("cpu_unmeasured")
        return cls(results, messages,
                   observed={k: v for k, v in observed.items() if isinstance(v, str)}
                   if isinstance(observed, dict) else {},
                   phases={k: float(v) for k, v in phases.items() if isinstance(k, str)
                           and k.startswith("runner_") and isinstance(v, (int, float))}
                   if isinstance(phases, dict) else {},
                   state_changed=changed if isinstance(changed, str) and changed else None,
                   cpu_unmeasured=unmeasured[:200] if isinstance(unmeasured, str) and unmeasured
                   else None)


def _results(data: bytes, report: Any, bad: ValueError | None, expected: Sequence[str]
             ) -> tuple[str | None, dict[str, str], dict[str, str]]:
    """Why ``report`` (``data`` parsed; ``bad``: why it did not parse) is not the runner's
    report of the tests ``expected``, else its results and failure messages (each its last
    :data:`MAX_MESSAGE` characters)."""
    if not data.strip():
        return "the runner wrote no results (it was killed or stopped before the end)", {}, {}
    if len(data) > MAX_REPORT:
        return "the report is larger than the limit", {}, {}
    if bad is not None:
        return f"the report is not the runner's JSON ({bad})", {}, {}
    try:
        results = report["results"]
        messages = report.get("messages", {})
    except (KeyError, TypeError, AttributeError) as exc:
        return f"the report is not the runner's JSON ({exc})", {}, {}
    if not isinstance(results, dict) or set(results) != set(expected) or \
            not set(results.values()) <= _STATUSES:
        return "the report does not list exactly the tests that were to run", {}, {}
    if not isinstance(messages, dict) or not set(messages) <= set(expected) or \
            not all(isinstance(m, str) for m in messages.values()):
        return "the report's messages do not belong to the tests that were to run", {}, {}
    return None, results, {k: m[-MAX_MESSAGE:] for k, m in messages.items()}


class ProgramProof:
    """The host's end of a check program's proof of a finished run (the epilogue,
    ``proofgym/programs/epilogue.py``): the nonce is drawn only when the program asks (``?``),
    and the answer counts only if it is exactly one outcome byte and that nonce, with nothing
    after it. The pytest runner checks its test processes' proofs the same way, inside the
    sandbox (``_Proof`` in ``proofgym/programs/pytest_runner.py``, which also takes a payload);
    ``tests/verify/sandboxed/test_proof.py`` holds the two to the same answers."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray()
        self.nonce: bytes | None = None
        self.invalid = False

    def feed(self) -> str:
        """Read what arrived: ``"more"`` (read some), ``"wait"`` (nothing yet) or ``"end"`` (the
        program's end is closed)."""
        try:
            data = self.sock.recv(1 << 16)
        except BlockingIOError:
            return "wait"
        except OSError:
            return "end"
        if not data:
            return "end"
        self.buf += data
        if self.nonce is None:
            # what came before the ask is the program's own (it holds the socket too): ignored
            ask = self.buf.find(b"?")
            del self.buf[:ask + 1 if ask >= 0 else len(self.buf)]
            if ask < 0:
                return "more"
            self.nonce = os.urandom(NONCE_BYTES)
            try:
                self.sock.send(self.nonce)  # a fresh socket's buffer holds it: never blocks
            except OSError:
                self.invalid = True
        if len(self.buf) > 1 + NONCE_BYTES:
            self.invalid = True
        return "more"

    def outcome(self) -> str | None:
        """``"passed"`` for a valid answer of outcome 0 (the runner's code for a pass), else
        the answer's outcome, or ``None`` when there is no valid answer."""
        if self.invalid or self.nonce is None or len(self.buf) != 1 + NONCE_BYTES:
            return None
        if bytes(self.buf[1:]) != self.nonce:
            return None
        return _OUTCOMES.get(self.buf[0])
