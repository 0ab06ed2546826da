"""The test runner that runs *inside* the grading sandbox (its source is passed to ``python -c``).

It uses the standard library and pytest only, and never imports code from the workspace itself:

* It imports pytest, every ``_pytest`` module and the standard-library modules pytest may load
  lazily while ``/workspace`` is not on ``sys.path``; the workspace is later *appended* to
  ``sys.path`` (and pytest runs with ``--import-mode=append``), so no file the agent writes can
  shadow the standard library or pytest.
* pytest's configuration is explicit: ``-c`` with the task's restored configuration file (or an
  empty one), ``--rootdir=/workspace``, plugin autoloading off, the cache provider off, no
  ``PYTEST_*`` variables. No configuration file the agent writes is read.
* It makes itself non-dumpable (no ptrace, no ``/proc/<pid>/fd`` or ``mem`` for processes of
  the same user), then runs each test in a forked child that closes the report descriptor before
  any test code runs. After each test every other process of the sandbox is killed, so nothing
  the code under test starts outlives its test.
* **A pass needs proof.** A child's exit status counts for nothing: after the test's pytest run
  has returned in the child, the child asks the runner on a socket of its own; only then does the
  runner draw a fresh random nonce for that test and send it, and the child answers with the
  outcome and the nonce. A test is ``passed`` only with that answer; a child that ends without it
  (``os._exit(0)`` at import, in the test or from a thread, ``sys.exit(0)``, a replaced
  ``os._exit``, a killed interpreter) is ``crashed``, a scored failure
  (``tests/security/test_attack_unproved_pass.py``). Code under test that deliberately speaks
  this protocol itself (it runs in the same process, so it can) is what the mutants are for.
* **Time limits count the code's own time.** A test's limit is measured in wall time less the
  time its processes waited for a CPU (``run_delay``, the 2nd field of
  ``/proc/<pid>/schedstat``), and never less than the CPU time they consumed. Past the wall
  limit with less own time than the limit (the host was busy), the test runs on, up to
  :data:`BACKSTOP` times its limit; starved still at that point it is ``starved``, and the host
  turns that into a grader *error*, never a scored 0 (``tests/security/test_attack_busy_host.py``),
  where the sandbox's own CPU use is measured: its CPU cgroup (root), or this runner's count of
  the CPU of every process a test starts however it is reaped (:class:`_SandboxCpu`). Where
  neither is, it is a scored timeout with that reason: busy loops the code under test hides
  (auto-reaped, orphaned) cannot be told from a busy host there
  (``tests/security/test_attack_starvation_claims.py``, root and ordinary user).
* **Expected values stay on the host.** A hidden test's checks against a literal arrive
  rewritten (:mod:`proofgym.verify.sandboxed.withheld`) as ``__proofgym_observe__(site, value)``:
  the test process records each computed value (plain data only, :func:`_plain`) and sends the
  record after the nonce of its proof; the runner reports it (``observed``) and the host, which
  alone holds the literals, compares. Code under test can send values of its own, but not the
  expected ones it never sees.
* The parent alone writes the results, as one JSON object, to the report descriptor. A test
  process's failure message comes back on a pipe of its own: informative text, never a result.
* It may be started ahead of its grading (:mod:`proofgym.verify.sandboxed.warm_runners`): it loads pytest,
  says ``ready``, then reads its one job from a pipe (the manifest, the files to write and the
  generated test files) and writes the files into ``/workspace`` itself, each path component
  opened with ``O_NOFOLLOW`` from a directory descriptor, before any test runs.
* A test process sees only its own generated test file: the job is held in one ``bytearray``,
  test N's file is written just before test N's process is forked (and removed after), and that
  process zeroes its copy of the job before any test code runs.
* After each test, the writable areas are put back as they were before the first test and every
  System V IPC object is removed: a test process leaves nothing for the next one
  (``tests/security/test_attack_test_isolation.py``).
* **A test process cannot touch the runner.** It runs as the runner's uid (the sandbox's user
  namespace maps one uid: there is no second one to give it), so before any test code runs it
  installs a seccomp filter the host built (:func:`proofgym.runtimes.sandbox.guard_program`)
  that refuses, with ``EPERM``, every call that would signal, ``prlimit``, renice, re-pin,
  re-schedule or change the I/O priority of this runner or the sandbox's init: by pid, process
  group, "all processes", the whole user, a pidfd or ``/proc/<pid>`` directory, or as the owner
  a file sends ``SIGIO`` to (``tests/security/test_attack_runner_limits.py``: each limit number,
  renice, affinity, scheduling, I/O priority, ``SIGSTOP``/``SIGKILL`` by each of those routes).
  ``ptrace`` and the other process-memory calls are refused by the sandbox's own filter, and a
  setuid program gains nothing (``no_new_privs``). As a second line, before each fork the runner
  puts back its own resource limits, by number (0 to the kernel's ``RLIM_NLIMITS`` less one, with
  ``prlimit``: Python's ``resource`` module does not name ``RLIMIT_LOCKS``), nice value,
  scheduling policy, CPU affinity and I/O priority; one it cannot put back (a lowered hard
  limit, a raised nice value) stops the run as tampering before the next test (the same test
  file checks this without the filter), and so does a raised nice value of the session's
  autogroup (a program a test runs owns its ``/proc/self/autogroup``: a file, which no filter
  sees). Each test process
  gets fresh standard descriptors (``/dev/null``, a pipe of its own for its output) and a fresh
  pytest capture file, and may not create POSIX message queues (``RLIMIT_MSGQUEUE`` 0: the sandbox
  mounts no ``mqueue`` file system, so the runner could not list one to remove it)
  (``tests/security/test_attack_state_between_tests.py``).

The proof handshake is forgeable by code that implements it; that is what the mutants are for.

**The batch** (``manifest["batch"]``: tests the agent can read, the pass-to-pass suite) runs
after the per-test processes in *one* test process, forked and hardened as every other (the
same guard, descriptors, limits and restore), from the files as the agent sees them, each
collected whole in the host's file order as a native run does (a unittest class set up once,
its tests by name) with only the batch's tests kept; its per-test outcomes travel with its
proof (a process that ends without one: every batch test ``crashed``), and the host mixes
in canaries (mutants of batch tests) that a process reporting passes it did not earn passes
too (``tests/security/test_attack_forged_batch.py``).

Why one process per test, mutants included (not one process per set of mutants, which would
save a fork, a capture and a collection per mutant): a mutant catches a forger only if its
process cannot be told from a real test's. A process running several tests can (its session's
arguments, a second collection, several generated files on disk), so code that forges a pass
only where it sees one test would pass every real test and fail every mutant, never flagged;
batching real tests with them instead would let one test see another's file and leave state for
it (``tests/security/test_attack_test_isolation.py``, ``test_attack_mutant_pairs.py``).
"""

import contextlib
import errno
import functools
import json
import os
import resource
import select
import signal
import socket
import sys
import time

PASSED, FAILED, ERROR, SKIPPED = 0, 1, 2, 3
MESSAGE_BYTES = 2048  # the tail of a failing test's report kept as its message
_STATUS = {PASSED: "passed", FAILED: "failed", ERROR: "error", SKIPPED: "skipped"}
#: A test (and the whole run) may run this many times its limit in wall time while its own time
#: stays under the limit (a busy host); starved still at that point, it is ``starved``.
BACKSTOP = 4.0
_CHECK_S = 0.1  # how often a test past its wall limit is checked for its own time
_NONCE_BYTES = 16
_SEVERITY = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}
_STDLIB_PRELOAD = (
    "abc", "argparse", "ast", "atexit", "base64", "bdb", "bisect", "builtins", "codecs",
    "collections", "collections.abc", "contextlib", "copy", "dataclasses", "datetime", "decimal",
    "difflib", "dis", "doctest", "enum", "errno", "fnmatch", "fractions", "functools", "gc",
    "getpass", "glob", "hashlib", "heapq", "importlib", "importlib.abc", "importlib.machinery",
    "importlib.metadata", "importlib.resources", "importlib.util", "inspect", "io", "itertools",
    "json", "keyword", "linecache", "locale", "logging", "math", "numbers", "operator", "os",
    "pathlib", "pdb", "pickle", "pkgutil", "platform", "pprint", "random", "re", "reprlib", "shlex",
    "shutil", "signal", "socket", "stat", "string", "struct", "subprocess", "sys", "sysconfig",
    "tempfile", "textwrap", "threading", "time", "token", "tokenize", "tomllib", "traceback",
    "types", "typing", "unicodedata", "unittest", "unittest.mock", "uuid", "warnings", "weakref",
    "zipfile",
)


class _Phases:
    """CPU seconds (this runner's own, and its reaped test processes') and wall seconds per
    phase of the run, sent with the report for the host's timings (informative only)."""

    def __init__(self) -> None:
        self.spent: dict[str, list[float]] = {}
        self.mark = (0.0, 0.0, self._now()[2])
        self.done("interpreter")  # the interpreter's start and the compiling of this source

    @staticmethod
    def _now() -> tuple[float, float, float]:
        me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return (me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime, time.monotonic())

    def done(self, phase: str) -> None:
        now = self._now()
        spent = self.spent.setdefault(phase, [0.0, 0.0, 0.0])
        for i in range(3):
            spent[i] += now[i] - self.mark[i]
        self.mark = now

    def timings(self) -> dict[str, float]:
        out = {}
        for phase, (me, kids, wall) in self.spent.items():
            out[f"runner_{phase}_cpu_s"] = me
            if kids:
                out[f"runner_{phase}_children_cpu_s"] = kids
            out[f"runner_{phase}_wall_s"] = wall
        return out


def main() -> None:
    phases = _Phases()
    report_fd, job_fd = int(sys.argv[1]), int(sys.argv[2])
    os.set_inheritable(report_fd, False)
    os.set_inheritable(job_fd, False)
    for key in [k for k in os.environ if k.startswith("PYTEST")]:
        del os.environ[key]
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    _non_dumpable()
    guard = _check_guard(json.loads(sys.argv[4]))
    _preload()
    phases.done("preload")
    session = _configure(sys.argv[3] or _empty_config())
    phases.done("configure")
    os.write(report_fd, b"ready\n")
    job = _read_job(job_fd)  # the runner may wait here, booted ahead of its grading
    if job is None:  # the host closed the pipe without a job: never used
        return
    phases.done("wait_job")
    manifest, files, tests, secret = job
    try:
        problem = _write_files(files)
    except OSError as exc:  # not the artifact's doing: the host sees a runner that failed
        _send(report_fd, {"setup_error": f"writing the workspace failed: {exc}"})
        return
    if problem is not None:
        _send(report_fd, {"rejected": problem})
        return
    pristine = _Pristine(_writable_areas())
    settings = _Settings()
    _SANDBOX_CPU.start()  # before the first fork: every test process is counted
    phases.done("write_and_snapshot")
    budget = float(manifest["budget_s"])
    per_test = float(manifest["test_timeout_s"])
    started = time.monotonic()
    used = 0.0  # the own time (see _wait) the tests have taken so far
    results = {}
    messages = {}
    observed = {}  # node -> what its withheld checks computed (for the host to compare)
    stopped = None
    changed = None
    batch = list(manifest.get("batch", ()))
    # the batch (the visible tests, together) runs last: one entry of the loop, its tests' own
    # outcomes sent with its process's proof
    for node in [*manifest["run"], *([_BATCH] if batch else [])]:
        if stopped is not None:
            _record(results, node, batch, "not_run")
            continue
        changed = settings.restore()
        if changed is not None:  # an earlier test changed this process: the next must not see it
            _record(results, node, batch, "not_run")
            stopped = "the batch" if node is _BATCH else node
            continue
        remaining = budget - used
        backstop = BACKSTOP * budget - (time.monotonic() - started)
        if remaining <= 0:
            status, message = "timeout", None
        elif backstop <= 0:
            status, message = "starved", None
        elif node is _BATCH:
            for path in dict.fromkeys(n.split("::", 1)[0] for n in batch):
                if path in tests:  # a generated file of the batch (a canary)
                    _write_one(path, tests[path])
            status, message, own, seen = _run_one(batch, session, remaining,
                                                  min(BACKSTOP * remaining, backstop), report_fd,
                                                  secret, messages, guard)
            used += own
            status = _batch_results(results, messages, batch, status, seen)
            message = None
        else:
            # this test's file exists only while its own process runs (see _run_one)
            _write_one(node.split("::", 1)[0], tests[node.split("::", 1)[0]])
            limit = min(remaining, per_test)
            status, message, own, seen = _run_one(node, session, limit,
                                                  min(BACKSTOP * limit, backstop), report_fd,
                                                  secret, messages, guard,
                                                  node in manifest.get("several", ()))
            used += own
            if status == "passed" and seen is not None and \
                    sum(map(len, observed.values())) + len(seen) <= _MAX_REPORTED:
                observed[node] = seen  # past the cap, the host finds none: the test fails
        if node is not _BATCH:
            results[node] = status
        elif status in ("timeout", "starved"):
            _record(results, node, batch, status)
        if message is not None and status != "passed":
            messages[node] = message
        phases.done("batch" if node is _BATCH else "tests")
        _kill_others()
        phases.done("kill_others")
        pristine.restore()
        phases.done("restore")
        _remove_ipc()
        phases.done("remove_ipc")
        if status in ("timeout", "starved"):  # the time limit: what is left does not run
            stopped = "the batch" if node is _BATCH else node
    if changed is None:
        # the last test to run may have changed this process too (a runner reniced behind busy
        # children would pass the starvation witness): checked like the others, reported as such
        changed = settings.restore()
    phases.done("finish")
    _send(report_fd, {"results": results, "stopped_at": stopped, "state_changed": changed,
                      "cpu_unmeasured": _SANDBOX_CPU.unmeasured,
                      "phases": {**phases.timings(), **_SANDBOX_CPU.timings()},
                      "observed": observed,
                      "messages": {k: bytes(m).decode("utf-8", errors="replace")
                                   for k, m in messages.items() if m}})


#: The loop's entry for the batch: every test of ``manifest["batch"]`` in one process.
_BATCH = object()


def _record(results: dict, node, batch: list, status: str) -> None:
    """``status`` for ``node``, or for each test of the batch."""
    for name in (batch if node is _BATCH else [node]):
        results[name] = status


def _batch_results(results: dict, messages: dict, batch: list, status: str,
                   sent: str | None) -> str:
    """Each batch test's outcome, as its process sent it with its proof (``sent``); without a
    proof (the process ended early, ran out of time, sent what is not the outcomes), every
    test of the batch has the process's status: ``crashed`` and the like, never passed.
    Returns the batch's status for the loop."""
    outcomes, texts = None, {}
    if status in _SEVERITY and sent is not None:
        try:
            value = json.loads(sent)
            outcomes, texts = value["outcomes"], value.get("messages", {})
        except (ValueError, KeyError, TypeError):
            outcomes = None
    if not isinstance(outcomes, dict) or not isinstance(texts, dict):
        _record(results, _BATCH, batch, status if status not in _SEVERITY else "crashed")
        return status if status not in _SEVERITY else "crashed"
    for node in batch:
        got = outcomes.get(node)
        # a test it did not collect (a file the code under test broke at import) did not pass
        results[node] = got if got in _SEVERITY else "error"
        text = texts.get(node)
        if results[node] != "passed" and isinstance(text, str) and text:
            messages[node] = bytearray(text.encode("utf-8", errors="replace")[-MESSAGE_BYTES:])
    return status


def _send(report_fd: int, report: dict) -> None:
    view = memoryview(json.dumps(report).encode())
    while view:
        view = view[os.write(report_fd, view):]
    os.close(report_fd)


def _read_job(fd: int):
    """The job the host sends once: an 8-byte length, a JSON header (the manifest, and
    ``[path, size or null]`` per workspace file and per generated test file), then the files'
    bytes in that order; ``None`` if the pipe closes empty.

    The bytes are read straight into one ``bytearray`` (no other copy exists in this process):
    each test process zeroes it before any test code runs, so the generated tests' sources are
    on disk, one at a time, and nowhere in a test process's memory."""
    import io

    with io.FileIO(fd, "rb", closefd=True) as pipe:
        size = pipe.read(8)
        if not size:
            return None
        head = json.loads(_read_exact(pipe, int.from_bytes(size, "big")))
        total = sum(s or 0 for _, s in head["files"]) + sum(s for _, s in head["tests"])
        secret = bytearray(total)
        view = memoryview(secret)
        got = 0
        while got < total:
            n = pipe.readinto(view[got:])
            if not n:
                raise SystemExit("proofgym runner: the job ended early")
            got += n
    files, offset = [], 0
    for path, size in head["files"]:
        files.append((path, None if size is None else view[offset:offset + size]))
        offset += size or 0
    tests = {}
    for path, size in head["tests"]:
        tests[path] = view[offset:offset + size]
        offset += size
    return head["manifest"], files, tests, secret


def _read_exact(pipe, size: int) -> bytes:
    chunks = []
    while size:
        chunk = pipe.read(size)
        if not chunk:
            raise SystemExit("proofgym runner: the job ended early")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


#: What writing the artifact can run into that is the artifact's doing (too large, no space).
_AGENT_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.ENAMETOOLONG, errno.EISDIR,
                 errno.ENOTDIR, errno.EEXIST, errno.ENOTEMPTY, errno.ELOOP}


def _write_files(files) -> str | None:
    """Write (or, for ``None``, delete) each workspace-relative path, in order, never following
    a symlink: a symlink, file or directory in the way is replaced, as an overlay's upper layer
    would hide it. Returns why the artifact cannot be applied, or ``None``."""
    for path, data in files:
        try:
            _write_one(path, data)
        except OSError as exc:
            if exc.errno in _AGENT_ERRNOS:
                return f"the artifact cannot be applied: {exc.strerror} ({path})"
            raise
    return None


def _write_one(path: str, data) -> None:
    import shutil
    import stat

    parts = path.split("/")
    fd = os.open("/workspace", os.O_RDONLY | os.O_DIRECTORY)
    try:
        for name in parts[:-1]:
            try:
                sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                if data is None:
                    return
                os.mkdir(name, 0o755, dir_fd=fd)
                sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError:  # a symlink or a file in the way
                if data is None:
                    return
                os.unlink(name, dir_fd=fd)
                os.mkdir(name, 0o755, dir_fd=fd)
                sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = sub
        name = parts[-1]
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        if st is not None and stat.S_ISDIR(st.st_mode):
            shutil.rmtree(name, dir_fd=fd)
        elif st is not None:
            os.unlink(name, dir_fd=fd)
        if data is None:
            return
        out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=fd)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(out, view):]
        finally:
            os.close(out)
    finally:
        os.close(fd)


def _check_guard(guard: dict) -> bytes:
    """The seccomp program each test process installs before its test runs (built by the host:
    :func:`proofgym.runtimes.sandbox.seccomp.guard_program`), once this process is sure it
    protects the processes it must (this runner and its parent, the sandbox's init) and that a
    process can install it (a test process that could not would count as the test's error)."""
    protects = set(guard["protects"])
    if not {os.getpid(), os.getppid()} <= protects:
        raise SystemExit(f"proofgym runner: the test processes' filter protects {sorted(protects)}, "
                         f"not this runner ({os.getpid()}) and its parent ({os.getppid()})")
    program = bytes.fromhex(guard["filter"])
    pid = os.fork()
    if pid == 0:
        try:
            _install_guard(program)
            os.kill(os.getppid(), 0)  # refused (EPERM) once the filter is in place
        except PermissionError:
            os._exit(0)
        except BaseException:
            os._exit(2)
        os._exit(1)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit("proofgym runner: a test process cannot install its seccomp filter "
                         f"(exit {os.waitstatus_to_exitcode(status)})")
    return program


def _install_guard(program: bytes) -> None:
    """Install ``program`` over the sandbox's filter in this (test) process: from here on it
    cannot signal or change this runner or the sandbox's init (see :func:`_check_guard`)."""
    import ctypes

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    libc = ctypes.CDLL(None, use_errno=True)
    code = ctypes.create_string_buffer(program, len(program))
    prog = Program(len(program) // 8, ctypes.cast(code, ctypes.c_void_p))
    ulong = ctypes.c_ulong
    # no_new_privs is set already (bwrap needs it for the sandbox's filter): set for certain
    if libc.prctl(38, ulong(1), ulong(0), ulong(0), ulong(0)) != 0 or \
            libc.prctl(22, ulong(2), ctypes.byref(prog), ulong(0), ulong(0)) != 0:
        err = ctypes.get_errno()  # PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP (SECCOMP_MODE_FILTER)
        raise OSError(err, f"installing the test process's seccomp filter: {os.strerror(err)}")


def _non_dumpable() -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE
        raise SystemExit(f"proofgym runner: prctl(PR_SET_DUMPABLE) failed: errno {ctypes.get_errno()}")


def _preload() -> None:
    import importlib
    import pkgutil

    for name in _STDLIB_PRELOAD:
        importlib.import_module(name)
    import _pytest
    import pytest  # noqa: F401

    for info in pkgutil.walk_packages(_pytest.__path__, "_pytest."):
        try:
            importlib.import_module(info.name)
        except ImportError:  # modules for optional extras (e.g. pytester's pexpect) stay unloaded
            continue


def _configure(ini: str):
    """A pytest session, configured and started once here and inherited by every test process
    (doing it per test would double the run's time). The configuration is parsed for an empty
    private directory, so no ``conftest.py`` is imported in this process (configuring and
    starting a session runs pytest's own plugins only); each test process points the session at
    its one test, and pytest imports the conftests of that test's directories (under
    ``/workspace``) there."""
    import gc

    from _pytest.config import _prepareconfig
    from _pytest.main import Session

    os.makedirs("/tmp/proofgym-empty", exist_ok=True)
    config = _prepareconfig(["-c", ini, "--rootdir=/workspace", "--confcutdir=/workspace",
                             "-p", "no:cacheprovider", "-q", "--tb=short", "--import-mode=append",
                             "/tmp/proofgym-empty"])
    config._do_configure()
    session = Session.from_config(config)
    session.exitstatus = 0
    config.hook.pytest_sessionstart(session=session)
    # the capture file is opened once here otherwise, and every fork would share it (its
    # content, mode and times): each test process starts a capture of its own (_child)
    config.pluginmanager.getplugin("capturemanager").stop_global_capturing()
    sys.stdout.flush()
    sys.stderr.flush()
    _warm_caches(config)
    gc.freeze()  # the parent's objects stay out of every test process's collections
    return session


def _warm_caches(config) -> None:
    """Fill, once here, the caches every test process would otherwise fill for itself, from
    what this process holds already (nothing of the workspace): a failing test's report finds
    its source with ``inspect.getmodule``, which resolves the file of every loaded module (some
    350, each ``realpath``) the first time; collecting a test matches each name against the
    configuration's glob patterns (``norecursedirs``, ``python_files``, ...), each compiled to a
    regular expression on first use. A test process adds what it needs beyond these, in its own
    copy."""
    import inspect

    from _pytest.pathlib import fnmatch_ex

    inspect.getmodule(_warm_caches.__code__)  # (a function would be looked up by its __module__)
    patterns = list(config.getoption("doctestglob", None) or ["test*.txt"])
    for name in ("norecursedirs", "python_files", "python_classes", "python_functions"):
        with contextlib.suppress(ValueError, KeyError):
            patterns += config.getini(name)
    for pattern in patterns:
        fnmatch_ex(pattern, "/workspace/x")  # as collecting matches it (compiled, then cached)


def _empty_config() -> str:
    path = "/tmp/proofgym-pytest.ini"
    with open(path, "w") as f:
        f.write("[pytest]\n")
    return path


def _run_one(node: str | list[str], session, timeout: float, backstop: float, report_fd: int,
             secret: bytearray, messages: dict, guard: bytes, several: bool = False
             ) -> tuple[str, bytearray | None, float, str | None]:
    """The test's status, its failure message (its own words: informative, never trusted), the
    own time it took (see :func:`_wait`) and what its withheld checks observed (JSON text sent
    with its proof; ``None`` without one).

    The child zeroes every copy of the job it inherited (``secret``) and the earlier tests'
    messages (which may quote their expected values) before any test code runs."""
    msg_r, msg_w = os.pipe()
    out_r, out_w = os.pipe()
    ctl, ctl_child = socket.socketpair()
    for end in (ctl, ctl_child):
        # a socket's inode is not given fresh times by the kernel: it may come back with those
        # an earlier test's socket was given (``futimens``), so this one gets times of its own
        os.utime(end.fileno(), ns=(0, 0))
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = ERROR
        try:
            _wipe(secret)
            for kept in messages.values():
                _wipe(kept)
            os.close(report_fd)
            os.close(msg_r)
            os.close(out_r)
            ctl.close()
            os.set_blocking(msg_w, False)  # a test that filled the pipe loses its message only
            os.setpgid(0, 0)
            _fresh_process(out_w, keep=(msg_w, ctl_child.fileno()))
            _install_guard(guard)
            code, payload = _child(node, session, msg_w, several)
            _prove(ctl_child, code, payload)
        except BaseException:  # shown in the run's output; the test counts as an error
            import traceback

            traceback.print_exc()
            sys.stderr.flush()
        finally:
            os._exit(code)
    os.close(msg_w)
    os.close(out_w)
    ctl_child.close()
    try:
        status, own, seen = _wait(pid, ctl, out_r, timeout, backstop)
        os.set_blocking(msg_r, False)
        message = bytearray(MESSAGE_BYTES)  # read in place: no bytes object to linger
        try:
            del message[os.readv(msg_r, [message]):]
        except BlockingIOError:
            message = None
    finally:
        os.close(msg_r)
        os.close(out_r)
        ctl.close()
    return status, message, own, seen


def _fresh_process(out_w: int, keep: tuple[int, ...]) -> None:
    """Nothing the test process holds is shared with another test's: standard input is
    ``/dev/null``, output goes to a pipe of this test's own (the runner forwards it), and so does
    every other descriptor it inherited (pytest's ``faulthandler`` keeps a copy of the runner's
    standard error, whose mode, times and pipe size every fork would share); and no POSIX message
    queue can be created (none could be found and removed after the test)."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd not in keep and fd != out_w:
            with contextlib.suppress(OSError):  # the listing's own descriptor, closed by now
                os.dup2(out_w, fd, inheritable=os.get_inheritable(fd))
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(out_w, 1)
    os.dup2(out_w, 2)
    os.close(out_w)
    resource.setrlimit(resource.RLIMIT_MSGQUEUE, (0, 0))


def _prove(sock: socket.socket, code: int, payload: bytes) -> None:
    """The child's side of the proof: ask, receive this test's nonce, answer outcome + nonce +
    ``payload`` (a 4-byte length, then JSON: what the test's withheld checks observed, or a
    batch's outcomes per test). Called only once the test's pytest run has returned."""
    sock.setblocking(True)  # the code under test may have made the descriptor non-blocking
    sock.sendall(b"?")
    nonce = b""
    while len(nonce) < _NONCE_BYTES:
        chunk = sock.recv(_NONCE_BYTES - len(nonce))
        if not chunk:
            return
        nonce += chunk
    sock.sendall(bytes([code]) + nonce + len(payload).to_bytes(4, "big") + payload)


#: What this test process's withheld checks computed, in order: ``[site, encoded value]``.
_OBSERVED: list = []
#: The largest encoding of one observed value sent (a larger one is sent as ``{"big": true}``:
#: it cannot equal a withheld literal, which is at most a sixteenth of this).
MAX_OBSERVED = 262_144
_MAX_PAYLOAD = 8 << 20  # all of one test's observations
_MAX_REPORTED = 12 << 20  # all observations of the run (the host reads a report up to 16 MiB)


def _observe(site, value) -> None:
    """``__proofgym_observe__``: a withheld assert of the test (rewritten on the host,
    :mod:`proofgym.verify.sandboxed.withheld`) records its computed value and goes on; the host
    compares it with the literal only it holds. A value that is not plain data (a builtin value,
    or a subclass that keeps its comparison methods) is sent as ``{"unplain": type}``: the host
    cannot compare it, and the check fails."""
    try:
        encoded = _plain(value, 0)
        if len(json.dumps(encoded)) > MAX_OBSERVED:
            encoded = {"big": True}
    except (TypeError, ValueError, RecursionError) as exc:
        encoded = {"unplain": str(exc)[:200]}
    _OBSERVED.append([site, encoded])


_COMPARISONS = ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__")


def _plain(value, depth: int):
    """``withheld.encode`` of ``value`` (the same format), read through the builtin types'
    own methods, so a subclass's overrides of anything but comparison do not change it."""
    if depth > 200:
        raise ValueError("nested too deeply")
    kind = type(value)
    if value is None or kind in (bool, int, float, str):
        return value
    chain = kind.__mro__
    base = next((k for k in chain if k in _PLAIN_KINDS), None)
    if base is None:
        raise TypeError(f"a {kind.__qualname__} object is not plain data")
    for klass in chain[:chain.index(base)]:
        if any(name in vars(klass) for name in _COMPARISONS):
            raise TypeError(f"{kind.__qualname__} compares by methods of its own")
    if base in (int, float, str):
        return {int: int.__int__, float: float.__float__, str: str.__str__}[base](value)
    if base is list:
        return [_plain(v, depth + 1) for v in list.__iter__(value)]
    if base is tuple:
        return {"t": [_plain(v, depth + 1) for v in tuple.__iter__(value)]}
    if base is dict:
        return {"d": [[_plain(k, depth + 1), _plain(v, depth + 1)] for k, v in dict.items(value)]}
    if base in (set, frozenset):
        return {"s" if base is set else "z": [_plain(v, depth + 1) for v in base.__iter__(value)]}
    if base in (bytes, bytearray):
        return {"b" if base is bytes else "y": base.hex(value)}
    return {"c": [complex.real.__get__(value), complex.imag.__get__(value)]}  # complex


_PLAIN_KINDS = (int, float, str, list, tuple, dict, set, frozenset, bytes, bytearray, complex)


class _Proof:
    """The runner's side of the proof for one test: the nonce is drawn only when the child
    asks (``?``), and an answer counts only if it is exactly one outcome byte and that nonce,
    optionally followed (``payload=True``) by a 4-byte length and that many bytes of
    observations, with nothing after it."""

    def __init__(self, sock: socket.socket, payload: bool = False) -> None:
        self.payload = payload
        self.sock = sock
        self.buf = bytearray()
        self.nonce: bytes | None = None
        self.invalid = False

    def feed(self) -> str:
        """Read what arrived: ``"more"`` (read some), ``"wait"`` (nothing yet) or ``"end"`` (the
        child's end is closed)."""
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
            # what came before the ask is the code under test's (it holds the socket too):
            # ignored, so writing into it makes a test neither pass nor crash
            ask = self.buf.find(b"?")
            del self.buf[:ask + 1 if ask >= 0 else len(self.buf)]
            if ask < 0:
                return "more"
            self.nonce = os.urandom(_NONCE_BYTES)
            try:
                self.sock.send(self.nonce)  # a fresh socket's buffer holds it: never blocks
            except OSError:
                self.invalid = True
        if len(self.buf) > self._length():
            self.invalid = True
        return "more"

    def _length(self) -> int:
        """The answer's length, as far as it is known yet."""
        head = 1 + _NONCE_BYTES
        if not self.payload:
            return head
        if len(self.buf) < head + 4:
            return head + 4 + _MAX_PAYLOAD
        size = int.from_bytes(self.buf[head:head + 4], "big")
        return head + 4 + size if size <= _MAX_PAYLOAD else -1

    def outcome(self) -> str | None:
        if self.invalid or self.nonce is None or len(self.buf) != self._length():
            return None
        if bytes(self.buf[1:1 + _NONCE_BYTES]) != self.nonce:
            return None
        return _STATUS.get(self.buf[0])

    def observed(self) -> str | None:
        """The observations sent with a valid answer (JSON text), else ``None``."""
        if not self.payload or self.outcome() is None:
            return None
        return bytes(self.buf[1 + _NONCE_BYTES + 4:]).decode("utf-8", errors="replace")


def _wipe(buffer: bytearray) -> None:
    import ctypes

    if len(buffer):
        ctypes.memset((ctypes.c_char * len(buffer)).from_buffer(buffer), 0, len(buffer))


def _child(node: str | list[str], session, msg_fd: int, several: bool = False
           ) -> tuple[int, bytes]:
    """Collect and run one test in the inherited session (``_pytest.main._main`` for one node):
    one item, or (``several``: a parametrized test) every case of it, the worst outcome counting.
    A list of nodes (the batch) runs them all: the outcome of each goes with the proof.
    Returns the outcome code and the proof's payload."""
    import builtins

    builtins.__proofgym_observe__ = _observe
    sys.path.append("/workspace")  # appended: nothing in the workspace shadows a loaded module
    config = session.config
    capture = config.pluginmanager.getplugin("capturemanager")
    capture.start_global_capturing()  # a capture file of this process's own
    capture.suspend_global_capture()  # as pytest leaves it between its phases
    rec = _Recorder()
    config.pluginmanager.register(rec, "proofgym-recorder")
    if isinstance(node, list):
        # the batch's files, each whole, as a native run collects them (a unittest class's
        # tests by name, set up once; pathspec's IterTreeTest reads what its first test sets);
        # only the batch's tests of them run (_Recorder.pytest_collection_modifyitems)
        config.args = list(dict.fromkeys(n.split("::", 1)[0] for n in node))
        rec.keep = set(node)
    else:
        config.args = [node]
    try:
        config.hook.pytest_collection(session=session)
        config.hook.pytest_runtestloop(session=session)
    except session.Failed:
        rec.worst("failed")
    except session.Interrupted as exc:
        rec.worst("error", str(exc))
    finally:
        config.hook.pytest_sessionfinish(session=session, exitstatus=session.exitstatus)
        sys.stdout.flush()
        sys.stderr.flush()
        if rec.message:  # a full pipe (the test's own doing) costs the test its message only
            with contextlib.suppress(OSError):
                os.write(msg_fd, rec.message.encode("utf-8", errors="replace")[-MESSAGE_BYTES:])
    codes = {"passed": PASSED, "failed": FAILED, "error": ERROR, "skipped": SKIPPED}
    if isinstance(node, list):
        return codes[rec.outcome or "error"], json.dumps(
            {"outcomes": rec.by_node(node),
             "messages": {n: m[-MESSAGE_BYTES:] for n, m in rec.messages.items()}}).encode()
    payload = json.dumps(_OBSERVED).encode()
    if rec.items < 1 or (rec.items > 1 and not several) or rec.outcome is None:
        return ERROR, payload
    return codes[rec.outcome], payload


class _Recorder:
    def __init__(self) -> None:
        self.items = 0
        self.outcome = None
        self.message = ""
        self.each: dict[str, str] = {}  # item node id -> its worst outcome (for a batch)
        self.messages: dict[str, str] = {}
        self.collected: set[str] = set()
        self.keep: set[str] | None = None  # a batch's test ids: the others collected do not run

    def pytest_collection_modifyitems(self, session, config, items) -> None:
        if self.keep is None:
            return
        kept = [i for i in items if i.nodeid.split("[", 1)[0] in self.keep]
        if len(kept) < len(items):
            config.hook.pytest_deselected(items=[i for i in items if i not in kept])
            items[:] = kept

    def pytest_collection_finish(self, session) -> None:
        self.items = len(session.items)
        self.collected = {item.nodeid for item in session.items}

    def pytest_collectreport(self, report) -> None:
        if report.failed:
            self.worst("error", report.longreprtext)

    def pytest_runtest_logreport(self, report) -> None:
        text = report.longreprtext if report.failed else ""
        if report.when == "call":
            status = "passed" if report.passed else "failed" if report.failed else "skipped"
        elif report.failed:
            status = "error"
        elif report.skipped:
            status = "skipped"
        else:
            status = "passed"  # a setup or teardown that passed: the call decides
        if report.when != "call" and status == "passed":
            self.each.setdefault(report.nodeid, "passed")
        else:
            self._item(report.nodeid, status, text)
        if status != "passed" or report.when == "call":
            self.worst(status, text)

    def _item(self, nodeid: str, status: str, text: str) -> None:
        was = self.each.get(nodeid)
        if was is None or _SEVERITY[status] > _SEVERITY[was]:
            self.each[nodeid] = status
        if text and nodeid not in self.messages:
            self.messages[nodeid] = text

    def by_node(self, nodes: list[str]) -> dict[str, str]:
        """The outcome of each wanted node: the worst of its items (a parametrized test's
        cases), ``error`` for one not collected or whose item did not run to its call."""
        worst: dict[str, str] = {}
        for nodeid, status in self.each.items():
            base = nodeid.split("[", 1)[0]
            if nodeid not in self.collected:
                continue
            if base not in worst or _SEVERITY[status] > _SEVERITY[worst[base]]:
                worst[base] = status
        for nodeid in self.collected:  # collected but never reported: did not run
            base = nodeid.split("[", 1)[0]
            if nodeid not in self.each:
                worst[base] = "error"
        for nodeid, text in list(self.messages.items()):
            self.messages.setdefault(nodeid.split("[", 1)[0], text)
        return {n: worst.get(n, "error") for n in nodes}

    def worst(self, status: str, message: str = "") -> None:
        if message and not self.message:
            self.message = message
        self._worst(status)

    def _worst(self, status: str) -> None:
        if self.outcome is None or _SEVERITY[status] > _SEVERITY[self.outcome]:
            self.outcome = status


def _wait(pid: int, ctl: socket.socket, out_r: int, timeout: float,
          backstop: float) -> tuple[str, float, str | None]:
    """Wait for the test process: answer its proof, forward its output, and stop it once its
    *own* time reaches ``timeout`` (``timeout``), or its wall time ``backstop`` while its own
    time is still short of the limit (``starved``). Returns the status, the own time and the
    observations sent with the proof.

    Own time (:func:`_own`) is the wall time less the longest a thread of the test waited on a
    CPU run queue (``run_delay``), and at least the CPU time the test's processes consumed (up to
    the wall time): a sleeping or spinning test is timed as before, while the time a busy host
    kept it off the CPUs does not count. The test's own processes' CPU time counts, but not
    that of children nobody waits for (``SIGCHLD`` ignored), which can keep a test waiting as a
    busy host would; so a test is ``starved`` only when this runner, which wakes every
    ``_WITNESS_S`` and runs briefly, itself waited for a CPU at least ``_WITNESS_SHARE`` of the
    time (otherwise it is a scored ``timeout``; ``tests/security/test_attack_starvation_claims.py``)."""
    start = time.monotonic()
    base = _cpu_total()
    counted = _SANDBOX_CPU.now()
    witness = _my_delay()
    ctl.setblocking(False)
    os.set_blocking(out_r, False)
    proof = _Proof(ctl, payload=True)
    pidfd = os.pidfd_open(pid)
    poller = select.poll()
    for fd in (pidfd, ctl.fileno(), out_r):
        poller.register(fd, select.POLLIN)
    delay = 0.0
    status = None
    output = bytearray()
    try:
        while True:
            now = time.monotonic()
            until = start + timeout if now < start + timeout else now + _CHECK_S
            until = min(until, now + _WITNESS_S)  # wake often: the witness's own waits
            exited = False
            for fd, _ in poller.poll(max(0.0, until - now) * 1000):
                if fd == out_r:
                    if not _drain(out_r, output):
                        poller.unregister(out_r)
                elif fd == pidfd:
                    exited = True
                elif proof.feed() == "end":
                    poller.unregister(fd)
            if exited:
                break
            now = time.monotonic()
            if now < start + timeout:
                continue
            delay = max(delay, _delays(pid))
            own = _own(now - start, delay, _test_cpu(base, _live_cpu(), counted))
            if own >= timeout:
                status = "timeout"
            elif now - start >= backstop:
                # the test's own processes can starve it in ways the accounting above cannot
                # see (CPU of children nobody waits for): a busy host must also have kept this
                # runner, which only wakes briefly, waiting for a CPU
                host_busy = _my_delay() - witness >= _WITNESS_SHARE * (now - start)
                status = "starved" if host_busy else "timeout"
            if status is not None:
                _kill_group(pid)
                break
    finally:
        os.close(pidfd)
    if status is None:
        delay = max(delay, _delays(pid))  # the exited child is a zombie until reaped: still there
        while proof.feed() == "more":
            pass  # what the child wrote before it exited is in the socket already
        _drain(out_r, output)
    view = memoryview(output)  # the host keeps the run's output tail: this test's tail is enough
    while view:
        view = view[os.write(1, view):]
    live = _live_cpu()
    os.waitpid(pid, 0)
    own = _own(time.monotonic() - start, delay, _test_cpu(base, live, counted))
    if status is not None:
        return status, own, None
    return proof.outcome() or "crashed", own, proof.observed()


#: How often the runner wakes while a test runs, and the share of a test's wall time it must
#: itself have waited for a CPU for a starved test to count as starved by the host.
_WITNESS_S = 0.05
_WITNESS_SHARE = 0.1


def _test_cpu(base: float, live: float, counted: float | None) -> float:
    """The CPU time of the test's processes since ``base`` (:func:`_cpu_total`): the reaped and
    the living ones; where the sandbox's CPU is counted (``counted``, :class:`_SandboxCpu`), at
    least that count, which also holds what processes reaped by nobody's ``wait`` used."""
    cpu = _cpu_total() - base + live
    if counted is not None:
        cpu = max(cpu, (_SANDBOX_CPU.now() or 0.0) - counted)
    return cpu


class _SandboxCpu:
    """The CPU time of every process this runner starts from :meth:`start` on, however it ends
    and whoever reaps it, less this runner's own: a task-clock ``perf`` counter of this process
    that every later child, grandchild and thread inherits (the kernel adds an inherited
    counter's count to its parent's when its task exits, reaped or not). Children auto-reaped
    (``SIGCHLD`` ignored) add their CPU time to no ``cutime``: without this count they could
    keep a test waiting for a CPU and look like a busy host. The counter is opened on this
    process only (the grading sandbox's filter allows nothing else), and test processes can
    neither reach its descriptor (:func:`_fresh_process` replaces it) nor open one
    (:func:`_install_guard`). ``unmeasured`` says why there is no count (the host's
    ``perf_event_paranoid`` above 2, an unknown architecture): then a starved test is scored as
    a timeout by the host unless its cgroup measured the sandbox."""

    def __init__(self) -> None:
        self.fd: int | None = None
        self.unmeasured: str | None = "not started"
        self.mine = 0.0  # this runner's CPU time when the count started

    def start(self) -> None:
        import ctypes
        import platform
        import struct

        call = _PERF_CALLS.get(platform.machine())
        if call is None:
            self.unmeasured = f"no perf_event_open number known for {platform.machine()}"
            return
        # PERF_ATTR_SIZE_VER0: type (software), size, config (task clock), sample period and
        # type, read format, flags (inherit, exclude_kernel and exclude_hv: all that
        # perf_event_paranoid 2 lets a process count; a task clock counts kernel time anyway)
        attr = ctypes.create_string_buffer(struct.pack("=IIQQQQQIIQ", 1, 64, 1, 0, 0, 0,
                                                       (1 << 1) | (1 << 5) | (1 << 6), 0, 0, 0))
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.syscall(call, attr, ctypes.c_long(0), ctypes.c_long(-1), ctypes.c_long(-1),
                          ctypes.c_ulong(8))  # this process, any CPU, no group, FD_CLOEXEC
        if fd < 0:
            self.unmeasured = f"perf_event_open: {os.strerror(ctypes.get_errno())}"
            return
        self.fd, self.unmeasured = fd, None
        self.mine = self._mine()

    def timings(self) -> dict[str, float]:
        """What the tests' processes used in all (informative, like the phases)."""
        counted = self.now()
        return {} if counted is None else {"runner_tests_counted_cpu_s": counted}

    def now(self) -> float | None:
        """Seconds counted so far, less this runner's own CPU time; ``None`` without a count."""
        if self.fd is None:
            return None
        return int.from_bytes(os.read(self.fd, 8), sys.byteorder) / 1e9 - (self._mine() - self.mine)

    @staticmethod
    def _mine() -> float:
        me = resource.getrusage(resource.RUSAGE_SELF)
        return me.ru_utime + me.ru_stime


_SANDBOX_CPU = _SandboxCpu()
_PERF_CALLS = {"x86_64": 298, "aarch64": 241}  # perf_event_open


def _my_delay() -> float:
    """Seconds this runner thread has waited on a CPU run queue."""
    try:
        with open("/proc/thread-self/schedstat", "rb") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def _own(wall: float, delay: float, cpu: float) -> float:
    """A test's own time: wall time less its longest wait for a CPU, but never less than the CPU
    time its processes used (so processes of its own that keep each other waiting still count),
    nor more than the wall time (a test using several CPUs is timed by the clock, as before)."""
    return max(wall - delay, min(cpu, wall))


_OUTPUT_TAIL = 32_768


def _drain(out_r: int, output: bytearray) -> bool:
    """Read what the test process wrote, keeping its tail (written to this runner's output
    after the test, for the host): read at once, never slowed by the host, so a test's own
    output pipe is not left full for pytest's report to run into. ``False`` at its end."""
    while True:
        try:
            data = os.read(out_r, 1 << 16)
        except BlockingIOError:
            return True
        if not data:
            return False
        output += data
        del output[:-_OUTPUT_TAIL]


_HZ = os.sysconf("SC_CLK_TCK")


def _stat_times(pid: int | str) -> float:
    """A process's CPU time and its reaped descendants', in seconds (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return sum(int(x) for x in fields[11:15]) / _HZ  # utime, stime, cutime, cstime


def _cpu_total() -> float:
    """CPU time of the dead processes of this sandbox so far: what this runner reaped, and what
    the sandbox's init (pid 1, which reaps orphans) did."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = usage.ru_utime + usage.ru_stime
    if os.getpid() != 1:
        try:
            with open("/proc/1/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            total += (int(fields[13]) + int(fields[14])) / _HZ
        except (OSError, IndexError):
            return total
    return total


def _others() -> list[str]:
    me = str(os.getpid())
    return [n for n in os.listdir("/proc") if n.isdigit() and n not in (me, "1")]


def _live_cpu() -> float:
    """CPU time of the living processes other than this runner and init (the test's)."""
    return sum(_stat_times(pid) for pid in _others())


def _delays(pid: int) -> float:
    """The longest time (seconds) a thread of the test's processes has waited on a CPU run
    queue; all of them started with this test (every other process was killed after the last)."""
    longest = 0
    for proc in {str(pid), *_others()}:
        try:
            tasks = os.listdir(f"/proc/{proc}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{proc}/task/{tid}/schedstat", "rb") as f:
                    longest = max(longest, int(f.read().split()[1]))
            except (OSError, IndexError, ValueError):
                continue
    return longest / 1e9


class _Settings:
    """This process's own settings that a test process of the same uid can change
    (``prlimit``, ``setpriority``, ``sched_setscheduler``, ``sched_setaffinity``, ``ioprio_set``
    on its parent) and that the next fork would inherit: recorded before the first test, put
    back before every fork."""

    def __init__(self) -> None:
        self.limits = {n: _rlimit(n) for n in range(_limit_count())}
        self.nice = os.getpriority(os.PRIO_PROCESS, 0)
        self.sched = (os.sched_getscheduler(0), os.sched_getparam(0).sched_priority)
        self.affinity = os.sched_getaffinity(0)
        self.ioprio = _ioprio(None)
        self.session_nice = _session_nice()

    def restore(self) -> str | None:
        """``None`` when all is as recorded (again); else what could not be put back."""
        for n, want in self.limits.items():
            if _rlimit(n) != want:
                with contextlib.suppress(OSError):  # a lowered hard limit stays
                    _rlimit(n, want)
        if os.getpriority(os.PRIO_PROCESS, 0) != self.nice:
            with contextlib.suppress(OSError):  # a raised nice value needs CAP_SYS_NICE
                os.setpriority(os.PRIO_PROCESS, 0, self.nice)
        if (os.sched_getscheduler(0), os.sched_getparam(0).sched_priority) != self.sched:
            with contextlib.suppress(OSError):
                os.sched_setscheduler(0, self.sched[0], os.sched_param(self.sched[1]))
        if os.sched_getaffinity(0) != self.affinity:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(0, self.affinity)
        if _ioprio(None) != self.ioprio:
            _ioprio(self.ioprio)
        wrong = [_RLIMITS.get(n, f"resource limit {n}") for n, want in self.limits.items()
                 if _rlimit(n) != want]
        if os.getpriority(os.PRIO_PROCESS, 0) != self.nice:
            wrong.append(f"nice value ({os.getpriority(os.PRIO_PROCESS, 0)}, was {self.nice})")
        if (os.sched_getscheduler(0), os.sched_getparam(0).sched_priority) != self.sched:
            wrong.append("scheduling policy")
        if os.sched_getaffinity(0) != self.affinity:
            wrong.append("CPU affinity")
        if _ioprio(None) != self.ioprio:
            wrong.append("I/O priority")
        if _session_nice() != self.session_nice:
            # a test process that exec'd a program owns its /proc/self/autogroup, the nice value
            # of the whole session (this runner's too); this non-dumpable runner cannot write it
            wrong.append(f"session's nice value (autogroup {_session_nice()}, was {self.session_nice})")
        return ", ".join(wrong) or None


_RLIMITS: dict[int, str] = {}  # the names Python knows (not all: RLIMIT_LOCKS is missing)
for _name in sorted(dir(resource), reverse=True):  # an alias (RLIMIT_OFILE) yields to its name
    if _name.startswith("RLIMIT_"):
        _RLIMITS[getattr(resource, _name)] = _name


def _rlimit(number: int, new: tuple[int, int] | None = None) -> tuple[int, int]:
    """Resource limit ``number`` of this process (set to ``new`` first), by the ``prlimit``
    system call: Python's ``resource`` module refuses numbers its headers did not name."""
    libc, limit = _prlimit()
    old = limit()
    if libc.prlimit(0, number, None if new is None else limit(*new), old) != 0:
        err = _errno()
        raise OSError(err, os.strerror(err))
    return (old.cur, old.max) if new is None else _rlimit(number)


@functools.cache
def _prlimit():  # type: ignore[no-untyped-def]
    import ctypes

    class Limit(ctypes.Structure):
        _fields_ = [("cur", ctypes.c_uint64), ("max", ctypes.c_uint64)]

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prlimit.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(Limit),
                             ctypes.POINTER(Limit)]
    return libc, Limit


def _errno() -> int:
    import ctypes

    return ctypes.get_errno()


def _limit_count() -> int:
    """The kernel's number of resource limits (its ``RLIM_NLIMITS``): limits 0 to this less one
    exist, the first number it refuses (``EINVAL``) is the count."""
    count = 0
    while True:
        try:
            _rlimit(count)
        except OSError:
            return count
        count += 1
#: ioprio_set, ioprio_get
_IOPRIO_CALLS = {"x86_64": (251, 252), "aarch64": (30, 31)}


def _session_nice() -> int | None:
    """The nice value of this process's autogroup (its session's share of the CPU where the
    kernel groups by session); ``None`` where there is none."""
    try:
        with open("/proc/self/autogroup", "rb") as f:
            return int(f.read().split()[-1])
    except (OSError, ValueError, IndexError):
        return None


def _ioprio(value: int | None) -> int:
    """This process's I/O priority; with ``value``, set it first. -1 where unknown."""
    import ctypes
    import platform

    calls = _IOPRIO_CALLS.get(platform.machine())
    if calls is None:
        return -1
    libc = ctypes.CDLL(None, use_errno=True)
    if value is not None:
        libc.syscall(calls[0], 1, 0, value)  # IOPRIO_WHO_PROCESS, this process
    return libc.syscall(calls[1], 1, 0)


def _writable_areas() -> list[str]:
    """Where a test process can leave something for the next one: the writable directories."""
    areas = ["/workspace", "/tmp", "/dev/shm", "/var/tmp", os.environ.get("HOME", "/tmp")]
    return [a for a in dict.fromkeys(os.path.realpath(a) for a in areas)
            if os.path.isdir(a) and os.access(a, os.W_OK)]


class _Pristine:
    """The writable areas as they were before the first test, held in this process's memory
    (type, mode, times and content of each entry), and put back after every test: a test process
    sees nothing an earlier one wrote, changed, deleted or hid (by ``chmod``)."""

    def __init__(self, roots: list[str]) -> None:
        self.roots = roots
        self.entries: dict[str, tuple] = {}
        for root in roots:
            for path, st in _walk(root):
                self.entries[path] = self._record(path, st)

    @staticmethod
    def _record(path: str, st: os.stat_result) -> tuple:
        import stat

        content = None
        if stat.S_ISREG(st.st_mode):
            try:
                with open(path, "rb") as f:
                    content = f.read()
            except PermissionError:  # not ours to read: a test cannot change it either
                content = None
        elif stat.S_ISLNK(st.st_mode):
            content = os.readlink(path)
        return (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_ino, st.st_size,
                st.st_mtime_ns, st.st_ctime_ns, st.st_atime_ns, content, _xattrs(path))

    def restore(self) -> None:
        import shutil
        import stat

        settle = []
        for root in self.roots:
            # deepest first: what a removed directory held is gone with it
            for path, st in sorted(_walk(root), key=lambda e: e[0].count("/"), reverse=True):
                was = self.entries.get(path)
                same = was is not None and was[0] == stat.S_IFMT(st.st_mode) and was[2] == st.st_ino
                if same and was[5] == st.st_ctime_ns:
                    if was[6] != st.st_atime_ns:  # only read: the access time says by whom
                        settle.append(path)
                    continue  # untouched (a change of content, mode, times or xattrs moves ctime)
                if same and stat.S_ISDIR(st.st_mode):
                    settle.append(path)
                elif stat.S_ISDIR(st.st_mode):
                    shutil.rmtree(path)
                elif path not in self.roots:
                    os.unlink(path)
        for path, was in sorted(self.entries.items()):  # parents before children
            if path in self.roots or os.path.lexists(path):
                continue
            kind, content = was[0], was[7]
            if kind == stat.S_IFDIR:
                os.mkdir(path, 0o700)
            elif kind == stat.S_IFLNK:
                os.symlink(content, path)
            elif kind == stat.S_IFREG and content is not None:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                try:
                    view = memoryview(content)
                    while view:
                        view = view[os.write(fd, view):]
                finally:
                    os.close(fd)
            else:  # unreadable before the tests, or a fifo, socket or device: not restorable
                continue
            settle.append(path)
        for path in sorted(set(settle), key=lambda p: p.count("/"), reverse=True):
            was = self.entries[path]
            for name in set(_xattrs(path)) - set(was[8]):
                os.removexattr(path, name, follow_symlinks=False)
            if was[0] != stat.S_IFLNK:
                os.chmod(path, was[1])
            os.utime(path, ns=(was[6], was[4]), follow_symlinks=False)
            st = os.lstat(path)  # its new inode and change time are what the next test must keep
            self.entries[path] = (*was[:2], st.st_ino, was[3], was[4], st.st_ctime_ns,
                                  st.st_atime_ns, *was[7:])


def _walk(root: str):
    """Every entry under ``root`` (itself included), opening up directories a test made
    unreadable; symlinks are not followed."""
    import stat

    stack = [root]
    while stack:
        path = stack.pop()
        st = os.lstat(path)
        yield path, st
        if stat.S_ISDIR(st.st_mode):
            if stat.S_IMODE(st.st_mode) & 0o700 != 0o700:
                os.chmod(path, stat.S_IMODE(st.st_mode) | 0o700)
                st = os.lstat(path)
            with os.scandir(path) as it:
                stack.extend(e.path for e in it)


def _xattrs(path: str) -> tuple[str, ...]:
    try:
        return tuple(os.listxattr(path, follow_symlinks=False))
    except OSError:  # a file system without extended attributes
        return ()


#: (the ``*_INFO``, ``*_STAT_ANY``, ``*_STAT`` commands) of shmctl, semctl and msgctl
_IPC = (("shmctl", 14, 15, 13), ("semctl", 19, 20, 18), ("msgctl", 12, 13, 11))


def _remove_ipc() -> None:
    """Remove every System V IPC object (shared memory, semaphores, message queues): the sandbox
    has an IPC namespace of its own, so each one was made by a test."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(1024)
    for name, info, stat_any, stat_own in _IPC:
        highest = _ipcctl(libc, name, 0, info, buf)
        for index in range(highest + 1):
            ident = _ipcctl(libc, name, index, stat_any, buf)
            if ident < 0:
                ident = _ipcctl(libc, name, index, stat_own, buf)
            if ident >= 0:
                _ipcctl(libc, name, ident, 0, buf)  # IPC_RMID


def _ipcctl(libc, name: str, ident: int, cmd: int, buf) -> int:
    if name == "semctl":
        return libc.semctl(ident, 0, cmd, buf)
    return getattr(libc, name)(ident, cmd, buf)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        return


def _kill_others() -> None:
    """Kill every other process of this sandbox (the runner is the first process of a fresh pid
    namespace, so ``kill(-1)`` reaches only what the tests started), then reap our children."""
    if os.getpid() > 4:  # not in a pid namespace of our own: never signal the wider system
        return
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        return
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.001)


if __name__ == "__main__":
    main()
