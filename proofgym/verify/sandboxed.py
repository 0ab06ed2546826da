"""Grading code in a fresh sandbox, out of the agent's reach (SWE-bench semantics).

The artifact is checked, then applied over the read-only task snapshot in a *new* sandbox.
Changes to protected paths (tests, pytest configuration files of any name pytest reads, any
``conftest.py``) are dropped, so those files are exactly the snapshot's. The tests to run, and
one mutant of each (:mod:`proofgym.verify.mutants`), are written as freshly named single-test
files in a random order; the hidden tests' own files never enter the sandbox. The runner
(:mod:`proofgym.verify.sandbox_runner`) runs each of them in its own forked process and writes
the results, by generated id, to a descriptor no test process holds; the host maps them back.

Who caused a failure decides what it is: an artifact that cannot be applied (an unsafe or
inconsistent path, too large, no space left), tests that run out of time, a test process that
crashes or takes the runner down, a mutant that passes with its test: all are a :class:`TestRun` that grades
0, with the reason. Only host faults raise (:class:`SandboxSetupError`).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import random
import selectors
import signal
import stat
import subprocess
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath

from proofgym.core import Verdict
from proofgym.runtimes.sandbox import MinimalSystem, SandboxLimits, SandboxSetupError, cgroups
from proofgym.runtimes.sandbox.bwrap import (
    Overlay,
    bwrap_argv,
    find_bwrap,
    remove_scratch,
    scratch_dir,
    spawn,
)
from proofgym.runtimes.sandbox.shell import ansi_c_quote
from proofgym.runtimes.sandbox.system import PYTEST_PACKAGES
from proofgym.verify.mutants import Layout, TestSourceError, build_layout, list_tests

#: Files pytest reads as configuration (in the order it looks for them at a directory), plus the
#: interpreter's own startup hooks: never taken from the artifact, whatever a task protects.
CONFIG_FILES = ("pytest.toml", ".pytest.toml", "pytest.ini", ".pytest.ini", "pyproject.toml",
                "tox.ini", "setup.cfg")
ALWAYS_PROTECTED = (*CONFIG_FILES, "conftest.py", "sitecustomize.py", "usercustomize.py")
#: Protected by default: the tests and everything that configures pytest.
DEFAULT_PROTECTED = ("tests", "test", *ALWAYS_PROTECTED)
_MAX_REPORT = 16 << 20
_KEEP_OUTPUT = 32_768
_MAX_MESSAGE = 2048
_STARTUP_S = 20.0  # the host's deadline is the test budget plus this (runner start, report)
_CLEANUP = ThreadPoolExecutor(1, thread_name_prefix="proofgym-grade-cleanup")
_RUNNER = (Path(__file__).with_name("sandbox_runner.py")).read_text()
_READY = b"ready\n"
_STATUSES = {"passed", "failed", "error", "skipped", "timeout", "crashed", "not_run"}
_AGENT_OS_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.ENAMETOOLONG, errno.EISDIR,
                    errno.ENOTDIR, errno.EEXIST, errno.ENOTEMPTY, errno.ELOOP}


def is_protected(path: str, protected: Iterable[str]) -> bool:
    """Whether ``path`` (workspace-relative) falls under a protected entry.

    An entry without ``/`` matches any path component (``conftest.py`` anywhere, any ``tests``
    directory); an entry with ``/`` matches that path and everything under it.
    """
    parts = PurePosixPath(path).parts
    for entry in protected:
        entry = entry.strip("/")
        if "/" in entry:
            if path == entry or path.startswith(entry + "/"):
                return True
        elif entry in parts:
            return True
    return False


def _safe_relpath(path: str) -> bool:
    p = PurePosixPath(path)
    return bool(path) and "\x00" not in path and not p.is_absolute() and ".." not in p.parts \
        and p.parts[:1] != (".",)


def check_artifact(changes: Mapping[str, bytes | None], *, max_bytes: int) -> str | None:
    """Why these changes cannot be applied as a tree, or ``None``: a path under another changed
    file's path or under a deleted path, or more than ``max_bytes`` of content in all."""
    total = sum(len(c) for c in changes.values() if c is not None)
    if total > max_bytes:
        return (f"the changed files hold {total} bytes, over the grading limit of {max_bytes} "
                "bytes")
    paths = sorted(changes)
    for path in paths:
        for parent in PurePosixPath(path).parents:
            p = str(parent)
            if p in changes and p != ".":
                kind = "deleted" if changes[p] is None else "a file"
                return f"{path!r} lies under {p!r}, which the artifact also lists as {kind}"
    return None


@dataclass(frozen=True)
class TestRun:
    """The outcome of one isolated test run.

    ``results`` maps the real test ids to ``passed``, ``failed``, ``error``, ``skipped``,
    ``timeout``, ``crashed`` or ``not_run``; it is empty when no valid report came back
    (``report_error`` says why). ``failure`` names the cause of a run that cannot be graded on
    its tests (``artifact_rejected``, ``tests_timed_out``, ``runner_killed``,
    ``tampering_detected``); ``None`` otherwise.
    """

    results: Mapping[str, str]
    exit_code: int | None
    timed_out: bool
    report_error: str | None
    tampered: bool
    output: str
    dropped: tuple[str, ...] = ()
    timings: Mapping[str, float] = field(default_factory=dict)
    mutants: int = 0
    mutants_passed: int = 0
    unmutable: tuple[str, ...] = ()
    failure: str | None = None
    #: Real test id -> the tail of its failure report (assertion text, traceback), for tests
    #: that did not pass; informative only (the code under test can write it), bounded in size.
    messages: Mapping[str, str] = field(default_factory=dict)


def _rejected(reason: str, dropped: Sequence[str], t0: float) -> TestRun:
    return TestRun({}, None, False, reason, False, "", tuple(sorted(dropped)),
                   {"total_s": time.perf_counter() - t0}, failure="artifact_rejected")


def test_sources(snapshot: Path, allowed: Mapping[str, bytes | None], hidden: Mapping[str, bytes],
                 files: Iterable[str]) -> dict[str, bytes]:
    """The source each test file will have in the grading sandbox (hidden, else changed, else
    the snapshot's)."""
    sources: dict[str, bytes] = {}
    for path in files:
        if path in hidden:
            sources[path] = hidden[path]
        elif path in allowed:
            if allowed[path] is not None:
                sources[path] = allowed[path]  # type: ignore[assignment]
        elif (snapshot / path).is_file():
            sources[path] = (snapshot / path).read_bytes()
    return sources


def run_tests_isolated(snapshot: str | Path, changes: Mapping[str, bytes | None], *,
                       tests: Sequence[str], hidden: Mapping[str, bytes] | None = None,
                       protected: Sequence[str] = DEFAULT_PROTECTED, timeout_s: float = 120.0,
                       test_timeout_s: float | None = None, limits: SandboxLimits | None = None,
                       packages: Sequence[str] = PYTEST_PACKAGES, mutants: bool = True,
                       max_artifact_bytes: int | None = None,
                       rng: random.Random | None = None) -> TestRun:
    """Run the tests ``tests`` (node ids ``file::[Class::]name``, or whole files) and a mutant
    of each in a fresh sandbox holding ``snapshot`` plus the allowed ``changes`` plus ``hidden``
    files; ``timeout_s`` bounds the whole run, ``test_timeout_s`` each test.

    Raises :class:`SandboxSetupError` only for host problems (no bwrap, no overlay, a runner
    that could not start); anything the artifact or the code under test does ends in a
    :class:`TestRun`.
    """
    t0 = time.perf_counter()
    snapshot = Path(snapshot).resolve()
    limits = limits or SandboxLimits()
    hidden = dict(hidden or {})
    allowed, dropped = split_changes(changes, protected)
    budget = max_artifact_bytes if max_artifact_bytes is not None else (limits.workspace_mb << 20) // 2
    problem = check_artifact(allowed, max_bytes=budget)
    if problem is not None:
        return _rejected(f"the artifact cannot be applied: {problem}", dropped, t0)
    files = sorted({t.split("::", 1)[0] for t in tests})
    sources = test_sources(snapshot, allowed, hidden, files)
    listed: dict[str, list[str]] = {}
    for path, source in list(sources.items()):
        try:
            listed[path] = [i.node_id for i in list_tests(path, source)]
        except TestSourceError:
            if path not in allowed:  # the task's own test file: a task fault
                raise
            del sources[path]  # a test file the agent broke: its tests do not run (not passed)
    # a test the files (as the agent left them) do not define does not run either
    wanted = [w for t in tests for w in (listed.get(t, []) if "::" not in t else [t])
              if w in listed.get(w.split("::", 1)[0], [])]
    layout = build_layout(sources, wanted, taken=[*allowed, *hidden, *_snapshot_paths(snapshot)],
                          rng=rng, with_mutants=mutants,
                          # the agent knows the visible tests already: mutants of the hidden ones
                          # are what it cannot tell apart
                          mutate_files=[f for f in sources if f in hidden] or None)
    extra = {**{p: c for p, c in hidden.items() if p not in sources}, **layout.files}
    config = next((f"/workspace/{name}" for name in CONFIG_FILES if (snapshot / name).is_file()), None)
    manifest = {"run": layout.run, "config": config, "budget_s": timeout_s,
                "test_timeout_s": test_timeout_s or timeout_s}
    read_fd, write_fd = os.pipe()
    runner = ["/opt/python/bin/python3", "-I", "-B", "-c", _RUNNER, str(write_fd),
              json.dumps(manifest)]
    try:
        with grading_sandbox(snapshot, allowed, extra, command=runner, limits=limits,
                             packages=packages, pass_fds=(write_fd,)) as proc:
            t1 = time.perf_counter()
            os.close(write_fd)
            write_fd = -1
            report, output, host_timeout = _collect(proc, read_fd, timeout_s + _STARTUP_S)
            t2 = time.perf_counter()
    except ArtifactRejected as exc:
        return _rejected(str(exc), dropped, t0)
    finally:
        for fd in (read_fd, write_fd):
            if fd >= 0:
                os.close(fd)
    t3 = time.perf_counter()
    timings = {"prepare_s": t1 - t0, "run_s": t2 - t1, "cleanup_s": t3 - t2,
               "total_s": time.perf_counter() - t0}
    if not report.startswith(_READY):
        if host_timeout:
            raise SandboxSetupError(f"the grading runner did not start within {_STARTUP_S + timeout_s:.0f} s")
        raise SandboxSetupError("the grading runner failed before running any test (exit "
                                f"{proc.returncode if proc else None}): {output[-2000:]}")
    raw, error, messages = parse_report(report[len(_READY):], layout.run)
    run = _summarise(layout, raw, error, proc.returncode if proc else None, host_timeout, output,
                     dropped, timings)
    if run.results:
        run = replace(run, messages={real: messages[gen] for gen, real in layout.real.items()
                                     if gen in messages})
    return run



class ArtifactRejected(Exception):
    """Internal: the artifact could not be written into the grading workspace (its fault)."""


def split_changes(changes: Mapping[str, bytes | None], protected: Sequence[str]
                  ) -> tuple[dict[str, bytes | None], list[str]]:
    """The changes grading applies, and the paths it drops (unsafe or protected)."""
    protected = (*protected, *ALWAYS_PROTECTED)
    allowed: dict[str, bytes | None] = {}
    dropped: list[str] = []
    for path, content in changes.items():
        if not _safe_relpath(path) or is_protected(path, protected):
            dropped.append(path)
        else:
            allowed[path] = content
    return allowed, dropped


@contextlib.contextmanager
def grading_sandbox(snapshot: Path, allowed: Mapping[str, bytes | None],
                    extra: Mapping[str, bytes], *, command: Sequence[str],
                    limits: SandboxLimits, packages: Sequence[str], pass_fds: Sequence[int] = (),
                    stdin: int | None = subprocess.DEVNULL,
                    stderr: int | None = subprocess.STDOUT) -> Iterator[subprocess.Popen[bytes]]:
    """A fresh sandbox over ``snapshot`` plus ``allowed`` then ``extra`` (the grader's files),
    running ``command``; killed and tidied on exit. Raises :class:`ArtifactRejected` when the
    changes cannot be written (their fault), :class:`SandboxSetupError` for host faults."""
    bwrap = find_bwrap()
    system = MinimalSystem.default(tuple(packages))
    root = scratch_dir("proofgym-grade-", limits.workspace_mb)
    cgroup = cgroups.create(limits.memory_mb << 20, limits.max_processes)
    if cgroup is None and os.geteuid() == 0:
        remove_scratch(root)
        raise SandboxSetupError("grading as root needs a writable cgroup hierarchy to cap processes")
    proc = spawned = None
    try:
        overlay = Overlay.create(snapshot, root)
        try:
            deleted = _apply(overlay.upper, snapshot, allowed)
            _apply(overlay.upper, snapshot, extra)
        except OSError as exc:
            if exc.errno not in _AGENT_OS_ERRORS:
                raise
            raise ArtifactRejected(f"the artifact cannot be applied: {exc.strerror} "
                                   f"({exc.filename})") from None
        command = list(command) if not deleted else [  # without root, no whiteouts: delete in there
            "bash", "--noprofile", "--norc", "-c",
            "rm -f -- " + " ".join(ansi_c_quote(p) for p in deleted) + "; exec \"$@\"", "bash",
            *command]
        argv = bwrap_argv(bwrap, system, limits, command, workspace=overlay.merged)
        spawned = spawn(argv, overlay=overlay, limits=limits, cgroup=cgroup, pass_fds=pass_fds,
                        stdin=stdin, stderr=stderr)
        proc = spawned.proc
        yield proc
    finally:
        if proc is not None and proc.poll() is None:
            _kill(proc)
        if spawned is not None:
            spawned.detach_mount()
        _CLEANUP.submit(_clean_up, cgroup, root)  # the grade does not wait for the tidying


def _summarise(layout: Layout, raw: Mapping[str, str], error: str | None, exit_code: int | None,
               host_timeout: bool, output: str, dropped: Sequence[str],
               timings: Mapping[str, float]) -> TestRun:
    common = dict(exit_code=exit_code, output=output, dropped=tuple(sorted(dropped)),
                  timings=dict(timings), mutants=len(layout.mutant),
                  unmutable=tuple(layout.unmutable))
    if error is not None:
        why = (f"the test run did not finish within its time limit: {error}" if host_timeout
               else f"the test run was cut short by the code under test: {error}")
        return TestRun({}, timed_out=host_timeout, report_error=why, tampered=False,
                       failure="tests_timed_out" if host_timeout else "runner_killed", **common)
    results = {real: raw[gen] for gen, real in layout.real.items()}
    # a mutant passing alone is wrong code that happens to give the mutant's value (a buggy
    # count of 0 where the test wants 1 and the mutant 0); a mutant passing *with* its test is
    # impossible for code that computes anything: both were made to pass
    passed = sorted(of for g, of in layout.mutant.items()
                    if raw[g] == "passed" and results.get(of) == "passed")
    timed_out = any(s == "timeout" for s in raw.values())
    if passed:
        return TestRun({}, timed_out=timed_out, tampered=True, mutants_passed=len(passed),
                       report_error=("tampering: these tests passed and so did their mutants (the "
                                     f"same test with an expected value changed): {passed}"),
                       failure="tampering_detected", **common)
    if timed_out:  # which tests ran before the stop depends on the random order: none count
        return TestRun({}, timed_out=True, tampered=False, failure="tests_timed_out",
                       report_error="a test ran past its time limit (or the run past its budget); "
                                    "the tests after it did not run", **common)
    return TestRun(results, timed_out=False, report_error=None, tampered=False, **common)


def parse_report(data: bytes, expected: Sequence[str]
                 ) -> tuple[dict[str, str], str | None, dict[str, str]]:
    """The runner's results and failure messages by generated test id, or why the report is not
    valid (it must be one JSON object naming exactly the tests that were to run)."""
    if not data.strip():
        return {}, "the runner wrote no results (it was killed or stopped before the end)", {}
    if len(data) > _MAX_REPORT:
        return {}, "the report is larger than the limit", {}
    try:
        report = json.loads(data)
        results = report["results"]
        messages = report.get("messages", {})
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return {}, f"the report is not the runner's JSON ({exc})", {}
    if not isinstance(results, dict) or set(results) != set(expected) or \
            not set(results.values()) <= _STATUSES:
        return {}, "the report does not list exactly the tests that were to run", {}
    if not isinstance(messages, dict) or not set(messages) <= set(expected) or \
            not all(isinstance(m, str) for m in messages.values()):
        return {}, "the report's messages do not belong to the tests that were to run", {}
    return results, None, {k: m[-_MAX_MESSAGE:] for k, m in messages.items()}


def _snapshot_paths(snapshot: Path) -> list[str]:
    return [p.relative_to(snapshot).as_posix() for p in snapshot.rglob("*")]


def _apply(upper: Path, snapshot: Path, files: Mapping[str, bytes | None]) -> list[str]:
    """Write ``files`` into the overlay's upper directory; deletions become whiteouts (as root)
    or are returned, to be deleted inside the sandbox."""
    deleted = []
    for path, content in files.items():
        target = upper / path
        if content is None:
            if (snapshot / path).exists() or (snapshot / path).is_symlink():
                deleted.append(path)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    if deleted and os.geteuid() == 0:  # overlay whiteouts: deleted before anything runs
        for path in deleted:
            (upper / path).parent.mkdir(parents=True, exist_ok=True)
            os.mknod(upper / path, 0o600 | stat.S_IFCHR, 0)
        deleted = []
    return deleted


def _clean_up(cgroup: cgroups.SandboxCgroup | None, root: Path) -> None:
    if cgroup is not None:
        for _ in range(400):  # the namespace's last processes exit just after its init
            if not cgroup.pids():
                break
            time.sleep(0.005)
        cgroup.remove()
    remove_scratch(root)


def files_under(root: Path) -> dict[str, bytes]:
    """Regular files under ``root`` by relative path (caches left out); ``{}`` if it is missing."""
    if not root.is_dir():
        return {}
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}


def _kill(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    finally:
        proc.wait()


def _collect(proc: subprocess.Popen[bytes], report_fd: int,
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
            _kill(proc)
            break
        for key, _ in sel.select(remaining):
            fd = key.fd if isinstance(key.fileobj, int) else key.fileobj.fileno()
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                sel.unregister(key.fileobj)
                continue
            if key.data == "report":
                if len(report) <= _MAX_REPORT:
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
            _kill(proc)
    proc.stdout.close()
    return bytes(report), output.decode("utf-8", errors="replace"), timed_out


def swebench_verdict(run: TestRun, fail_to_pass: Sequence[str], pass_to_pass: Sequence[str],
                     *, grader: str | None = None) -> Verdict:
    """Reward 1 exactly when every FAIL_TO_PASS test passed and every PASS_TO_PASS test still
    passes (a test missing from the report has not passed) and no mutant passed. A run that
    could not be graded on its tests is a scored 0 with the cause as a component and the reason
    as ``error``."""
    f2p = sum(run.results.get(t) == "passed" for t in fail_to_pass)
    p2p = sum(run.results.get(t) == "passed" for t in pass_to_pass)
    valid = run.report_error is None and not run.timed_out and run.failure is None
    resolved = valid and f2p == len(fail_to_pass) and p2p == len(pass_to_pass)
    metrics = {
        "fail_to_pass_passed": float(f2p), "fail_to_pass_total": float(len(fail_to_pass)),
        "pass_to_pass_passed": float(p2p), "pass_to_pass_total": float(len(pass_to_pass)),
        "tests_timed_out": float(run.timed_out), "report_invalid": float(run.report_error is not None),
        "tampering_detected": float(run.tampered), "protected_changes_dropped": float(len(run.dropped)),
        "artifact_rejected": float(run.failure == "artifact_rejected"),
        "mutants": float(run.mutants), "mutants_passed": float(run.mutants_passed),
        "tests_without_mutant": float(len(run.unmutable)),
        "grading_overhead_s": run.timings.get("total_s", 0.0) - run.timings.get("run_s", 0.0),
        "test_run_s": run.timings.get("run_s", 0.0),
    }
    components = {"resolved": float(resolved)}
    if run.failure is not None:
        components[run.failure] = 0.0
    return Verdict(float(resolved), components, metrics, grader=grader, error=run.report_error)
