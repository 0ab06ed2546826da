"""Grading code in a fresh sandbox, out of the agent's reach (SWE-bench semantics).

The artifact is applied over the read-only task snapshot in a *new* sandbox. Changes to
protected paths (tests, test configuration, any ``conftest.py``) are dropped, so those files are
exactly the snapshot's; hidden tests are added only now; pytest runs under a time limit and
writes its JUnit XML to an inherited pipe, never a file the code under test could find or fake.

What the code under test can still do, and how it is caught:
    * ``sys.exit`` at import: a collection error, so the tests it should make pass do not pass.
    * ``os._exit`` or killing pytest: no report on the pipe, reward 0.
    * Writing its own XML to the pipe: the pipe must carry exactly one XML document; a second
      one (before or after pytest's) makes the report unparseable, reward 0.
    * Patching pytest in-process so that every test passes: a sentinel test that must fail,
      named and written like the other tests (random name, in the hidden tests' folder), is run
      alongside; if it passes, the report is rejected as tampered.
    * Planting ``pytest.py`` (or ``_pytest/``) to replace the runner: pytest is imported from the
      sandbox's site-packages before the workspace joins ``sys.path``.

    What remains possible is what any in-process test runner allows (SWE-bench has the same):
    code under test that patches pytest to pass exactly the hidden tests, which it would have
    to name without ever seeing them.
"""

from __future__ import annotations

import os
import secrets
import selectors
import signal
import stat
import subprocess
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
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

#: Protected by default: the tests and everything that configures pytest.
DEFAULT_PROTECTED = ("tests", "test", "conftest.py", "pytest.ini", "setup.cfg", "tox.ini",
                     "pyproject.toml", "sitecustomize.py", "usercustomize.py")
_MAX_REPORT = 16 << 20
_KEEP_OUTPUT = 32_768
_CLEANUP = ThreadPoolExecutor(1, thread_name_prefix="proofgym-grade-cleanup")
_SEVERITY = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}


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


@dataclass(frozen=True)
class TestRun:
    """The outcome of one isolated test run.

    ``results`` maps pytest node ids to ``passed``, ``failed``, ``error`` or ``skipped``; it is
    empty when no valid report came back (``report_error`` says why).
    """

    results: Mapping[str, str]
    exit_code: int | None
    timed_out: bool
    report_error: str | None
    tampered: bool
    output: str
    dropped: tuple[str, ...] = ()
    timings: Mapping[str, float] = field(default_factory=dict)


def run_tests_isolated(snapshot: str | Path, changes: Mapping[str, bytes | None], *,
                       tests: Sequence[str], hidden: Mapping[str, bytes] | None = None,
                       protected: Sequence[str] = DEFAULT_PROTECTED, timeout_s: float = 120.0,
                       limits: SandboxLimits | None = None,
                       packages: Sequence[str] = PYTEST_PACKAGES) -> TestRun:
    """Run pytest on ``tests`` (files or node ids) in a fresh sandbox holding ``snapshot`` plus
    the allowed ``changes`` plus ``hidden`` files.

    Raises :class:`SandboxSetupError` only for host problems (no bwrap, no overlay); anything
    the code under test does ends in a :class:`TestRun`.
    """
    t0 = time.perf_counter()
    snapshot = Path(snapshot).resolve()
    limits = limits or SandboxLimits()
    bwrap = find_bwrap()
    system = MinimalSystem.default(tuple(packages))
    allowed: dict[str, bytes | None] = {}
    dropped: list[str] = []
    for path, content in changes.items():
        if not _safe_relpath(path) or is_protected(path, protected):
            dropped.append(path)
        else:
            allowed[path] = content
    sentinel, sentinel_id, sentinel_code = _sentinel(tests, {*changes, *(hidden or {})}, snapshot)
    extra = {**(hidden or {}), sentinel: sentinel_code}
    root = scratch_dir("proofgym-grade-", limits.workspace_mb)
    cgroup = cgroups.create(limits.memory_mb << 20, limits.max_processes)
    if cgroup is None and os.geteuid() == 0:
        remove_scratch(root)
        raise SandboxSetupError("grading as root needs a writable cgroup hierarchy to cap processes")
    read_fd = write_fd = -1
    proc = spawned = None
    try:
        overlay = Overlay.create(snapshot, root)
        deleted = []
        for path, content in [*allowed.items(), *extra.items()]:
            target = overlay.upper / path
            if content is None:
                if (snapshot / path).exists() or (snapshot / path).is_symlink():
                    deleted.append(path)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
        if deleted and os.geteuid() == 0:  # overlay whiteouts: deleted before anything runs
            for path in deleted:
                (overlay.upper / path).parent.mkdir(parents=True, exist_ok=True)
                os.mknod(overlay.upper / path, 0o600 | stat.S_IFCHR, 0)
            deleted = []
        read_fd, write_fd = os.pipe()
        pytest = ["/opt/python/bin/python3", "-I", "-B", "-c", _BOOT, "-q", "-p", "no:cacheprovider",
                  "--tb=short", "--continue-on-collection-errors", "-o", "junit_family=xunit1",
                  f"--junitxml=/dev/fd/{write_fd}", "--", *tests, sentinel]
        command = pytest if not deleted else [  # without root, no whiteouts: delete in there
            "bash", "--noprofile", "--norc", "-c",
            "rm -f -- " + " ".join(ansi_c_quote(p) for p in deleted) + "; exec \"$@\"", "bash", *pytest]
        argv = bwrap_argv(bwrap, system, limits, command, workspace=overlay.merged)
        t1 = time.perf_counter()
        spawned = spawn(argv, overlay=overlay, limits=limits, cgroup=cgroup, pass_fds=(write_fd,),
                        stdin=subprocess.DEVNULL)
        proc = spawned.proc
        os.close(write_fd)
        write_fd = -1
        report, output, timed_out = _collect(proc, read_fd, timeout_s)
        t2 = time.perf_counter()
    finally:
        for fd in (read_fd, write_fd):
            if fd >= 0:
                os.close(fd)
        if proc is not None and proc.poll() is None:
            _kill(proc)
        if spawned is not None:
            spawned.detach_mount()
        _CLEANUP.submit(_clean_up, cgroup, root)  # the grade does not wait for the tidying
    t3 = time.perf_counter()
    results, error = parse_junit(report)
    tampered = False
    if error is None:
        sentinel_status = results.pop(sentinel_id, None)
        if sentinel_status == "passed":
            tampered = True
            error = "the sentinel test that must fail passed: the test run was tampered with"
            results = {}
        elif sentinel_status is None:
            error = ("the sentinel test did not run: pytest stopped early (an exit at import, "
                     "an interrupted session) or the report was altered")
            results = {}
    return TestRun(results, proc.returncode if proc else None, timed_out, error, tampered,
                   output, tuple(sorted(dropped)),
                   {"prepare_s": t1 - t0, "run_s": t2 - t1, "cleanup_s": t3 - t2,
                    "total_s": time.perf_counter() - t0})


#: pytest is imported from the sandbox's site-packages *before* the workspace joins sys.path (as
#: ``python -m pytest`` would put it first), so a planted ``pytest.py`` or ``_pytest/`` in the
#: workspace is never the runner.
_BOOT = ("import sys, pytest, _pytest.junitxml, _pytest.reports; sys.path.insert(0, '/workspace'); "
         "sys.argv[0] = 'pytest'; sys.exit(pytest.main(sys.argv[1:]))")

_WORDS_A = ("basic", "edge", "empty", "nested", "unicode", "large", "mixed", "repeated", "single",
            "quoted", "invalid", "default", "reversed", "boundary", "sorted", "missing", "extra")
_WORDS_B = ("case", "input", "values", "order", "items", "keys", "range", "fields", "format",
            "limits", "errors", "paths", "names", "rows", "parse", "roundtrip", "spacing")


def _sentinel(tests: Sequence[str], taken: set[str], snapshot: Path) -> tuple[str, str, bytes]:
    """A test that must fail, named and written like any other test of the run, so code that
    tampers with the runner cannot tell it apart from the hidden tests it wants to pass."""
    rng = secrets.SystemRandom()
    folder = str(PurePosixPath(tests[0].split("::")[0]).parent) if tests else "."
    while True:
        a, b = rng.choice(_WORDS_A), rng.choice(_WORDS_B)
        name = f"test_{a}_{b}.py"
        path = name if folder in ("", ".") else f"{folder}/{name}"
        if path not in taken and not (snapshot / path).exists():
            break
    func = f"test_{rng.choice(_WORDS_A)}_{rng.choice(_WORDS_B)}"
    x = rng.randrange(10**6)
    code = f"def {func}():\n    result = {x}\n    assert result == {x + rng.choice((-1, 1))}\n"
    return path, f"{path}::{func}", code.encode()


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


def parse_junit(data: bytes) -> tuple[dict[str, str], str | None]:
    """Per-test outcomes by pytest node id from pytest's xunit1 JUnit XML, or an error.

    The data must be exactly one XML document (anything written before or after pytest's own
    report makes it invalid).
    """
    if not data.strip():
        return {}, "pytest wrote no report (it did not finish: crashed, exited early or was killed)"
    if len(data) > _MAX_REPORT:
        return {}, "the report is larger than the limit"
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        return {}, f"the report is not one well-formed XML document ({exc})"
    results: dict[str, str] = {}
    for case in root.iter("testcase"):
        node = _node_id(case.get("file"), case.get("classname", ""), case.get("name", ""))
        if node is None:
            continue
        if case.find("error") is not None:
            status = "error"
        elif case.find("failure") is not None:
            status = "failed"
        elif case.find("skipped") is not None:
            status = "skipped"
        else:
            status = "passed"
        if node not in results or _SEVERITY[status] > _SEVERITY[results[node]]:
            results[node] = status
    return results, None


def _node_id(file: str | None, classname: str, name: str) -> str | None:
    if not name:
        return None
    if not file:
        return f"{classname}::{name}" if classname else name
    module = file[:-3].replace("/", ".") if file.endswith(".py") else file
    inner = classname[len(module):].lstrip(".") if classname.startswith(module) else ""
    parts = [file, *(inner.split(".") if inner else []), name]
    return "::".join(p for p in parts if p)


def swebench_verdict(run: TestRun, fail_to_pass: Sequence[str], pass_to_pass: Sequence[str],
                     *, grader: str | None = None) -> Verdict:
    """Reward 1 exactly when every FAIL_TO_PASS test passed and every PASS_TO_PASS test still
    passes (a test missing from the report has not passed)."""
    f2p = sum(run.results.get(t) == "passed" for t in fail_to_pass)
    p2p = sum(run.results.get(t) == "passed" for t in pass_to_pass)
    valid = run.report_error is None and not run.timed_out
    resolved = valid and f2p == len(fail_to_pass) and p2p == len(pass_to_pass)
    metrics = {
        "fail_to_pass_passed": float(f2p), "fail_to_pass_total": float(len(fail_to_pass)),
        "pass_to_pass_passed": float(p2p), "pass_to_pass_total": float(len(pass_to_pass)),
        "tests_timed_out": float(run.timed_out), "report_invalid": float(run.report_error is not None),
        "tampering_detected": float(run.tampered), "protected_changes_dropped": float(len(run.dropped)),
        "grading_overhead_s": run.timings.get("total_s", 0.0) - run.timings.get("run_s", 0.0),
        "test_run_s": run.timings.get("run_s", 0.0),
    }
    return Verdict(float(resolved), {"resolved": float(resolved)}, metrics, grader=grader)
