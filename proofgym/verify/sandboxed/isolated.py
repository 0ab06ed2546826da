"""Grading code in a fresh sandbox, out of the agent's reach (SWE-bench semantics).

The artifact is checked, then applied over the read-only task snapshot in a *new* sandbox.
Changes to protected paths (tests, pytest configuration files of any name pytest reads, any
``conftest.py``) are dropped, so those files are exactly the snapshot's. The tests to run, and
one mutant of each (:mod:`proofgym.verify.sandboxed.mutants`), are written as freshly named single-test
files in a random order; the hidden tests' own files never enter the sandbox, and their checks
against a literal arrive with the literal withheld (:mod:`proofgym.verify.sandboxed.withheld`: the
test process sends what it computed, the host compares). The runner
(:mod:`proofgym.verify.sandboxed.runner`, booted ahead when a spare is ready:
:mod:`proofgym.verify.sandboxed.warm_runners`) receives the files on a pipe, writes them, runs each test in
its own forked process (which sees its own generated test file only) and writes the results, by
generated id, to a descriptor no test process holds; the host maps them back. Tests the agent
can read may instead run together in one such process (``batch``, with canaries: see
:func:`run_tests_isolated`).

Who caused a failure decides what it is: an artifact that cannot be applied (an unsafe or
inconsistent path, too large, no space left), tests that run out of time, a test process that
crashes, ends without the runner's proof of a finished test, or takes the runner down, a mutant
that passes with its test, a test process that changed the runner in a way it cannot undo: all
are a :class:`TestRun` that grades 0, with the reason. Tests the host kept off the CPUs until the
runner's backstop (``starved``) are ``TestRun.starved``: the host's fault, which
:func:`swebench_verdict` turns into a grader error, never a 0; that claim stands only where the
sandbox's own CPU use was measured (its cgroup, or the runner's count of every process the
tests started), and is a scored timeout with the reason otherwise. Only other host faults raise
(:class:`SandboxSetupError`).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import selectors
import subprocess
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from proofgym.core import Verdict
from proofgym.runtimes.grading_lease import grading_lease, hidden_key_of
from proofgym.runtimes.sandbox import (
    GRADING_PROTECTED_PIDS,
    PYTEST_PACKAGES,
    SandboxLimits,
    SandboxSetupError,
    SandboxSystem,
    guard_program,
)
from proofgym.verify.sandboxed.guards import one_case_view
from proofgym.verify.sandboxed.mutants import Layout, TestSourceError, build_layout, list_tests
from proofgym.verify.sandboxed.runner import BACKSTOP
from proofgym.verify.sandboxed.warm_runners import WARM, Runner
from proofgym.verify.sandboxed.withheld import verdicts, withhold_layout
from proofgym.verify.sandboxed.workspace import (
    ALWAYS_PROTECTED,
    CONFIG_FILES,
    DEFAULT_PROTECTED,
    check_artifact,
    files_under,
    is_protected,
    kill_sandbox,
    split_changes,
    start_sandbox,
)

__all__ = ["ALWAYS_PROTECTED", "CONFIG_FILES", "DEFAULT_PROTECTED", "TestRun", "check_artifact",
           "explain", "files_under", "is_protected", "run_tests_isolated", "swebench_verdict"]

_MAX_REPORT = 16 << 20
_KEEP_OUTPUT = 32_768
_MAX_MESSAGE = 2048
_STARTUP_S = 20.0  # the host's deadline is the test budget plus this (runner start, report)
_RUNNER = (Path(__file__).with_name("runner.py")).read_text()
_READY = b"ready\n"
_STATUSES = {"passed", "failed", "error", "skipped", "timeout", "crashed", "starved", "not_run"}


@dataclass(frozen=True)
class TestRun:
    """The outcome of one isolated test run.

    ``results`` maps the real test ids to ``passed``, ``failed``, ``error``, ``skipped``,
    ``timeout``, ``crashed`` (the test process ended without the runner's proof that its test
    finished) or ``not_run``; it is empty when no valid report came back (``report_error`` says
    why). ``failure`` names the cause of a run that cannot be graded on its tests
    (``artifact_rejected``, ``tests_timed_out``, ``runner_killed``, ``tampering_detected``,
    ``host_busy``); ``None`` otherwise. ``starved`` (with ``failure="host_busy"``) says the
    tests were kept off the CPUs by the host past the runner's backstop: nothing was judged.
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
    #: real test ids with at least one withheld check (:mod:`~proofgym.verify.sandboxed.withheld`)
    withheld: tuple[str, ...] = ()
    failure: str | None = None
    #: Real test id -> the tail of its failure report (assertion text, traceback), for tests
    #: that did not pass; informative only (the code under test can write it), bounded in size.
    messages: Mapping[str, str] = field(default_factory=dict)
    starved: bool = False
    #: mutants of batch tests (``run_tests_isolated(batch=...)``) run in the batch's process
    canaries: int = 0
    #: mutants of batch tests run in processes of their own, among the other tests'
    decoys: int = 0


    @property
    def unguarded(self) -> tuple[str, ...]:
        """Tests neither a mutant nor a withheld check guards: a forced pass of one goes
        unnoticed. A test with a withheld check is guarded without a mutant: to pass, its
        process must send, as its code runs the check, a value that holds against a literal it
        never sees (a forced pass that sends nothing is tampering, one that sends a guess fails)."""
        withheld = set(self.withheld)
        return tuple(t for t in self.unmutable if t not in withheld)

    @property
    def guarded(self) -> bool:
        """Whether any test is guarded (a mutant, or a withheld check, or, against a forger of
        every process of its own, the decoys): a task none of whose tests is cannot detect
        tampering, a grader error (``CodeRepairTask.verify``)."""
        return self.mutants > 0 or bool(self.withheld) or self.decoys > 0


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
                       rng: random.Random | None = None,
                       image: SandboxSystem | None = None,
                       batch: Sequence[str] = ()) -> TestRun:
    """Run the tests ``tests`` (node ids ``file::[Class::]name``, or whole files) and a mutant
    of each in a fresh sandbox holding ``snapshot`` plus the allowed ``changes`` plus ``hidden``
    files; ``timeout_s`` bounds the whole run, ``test_timeout_s`` each test, both in the tests'
    own time (wall time less the time the host kept them waiting for a CPU); in wall time a run
    may take up to ``BACKSTOP`` times ``timeout_s`` (plus the sandbox's start) on a busy host.
    With ``image`` the sandbox runs on that environment image (its interpreter runs the tests)
    instead of the minimal system with ``packages``.

    ``batch``: test ids (of ``tests``) that run together in one test process, from their own
    files, after the others (:func:`batch_plan`: the tests the agent can read; a hidden test
    keeps its own process), with up to :data:`CANARIES` mutants of them (canaries): a batch
    process that reports passes it did not earn, for all its tests alike, passes every canary
    with its test, which is tampering. Its time limit is what is left of ``timeout_s``.

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
    # the batch runs the files as the agent sees them (a hidden file's visible part)
    visible = {}
    for path, source in test_sources(snapshot, allowed, {}, {t.split("::", 1)[0] for t in batch}).items():
        try:
            visible[path] = (source, {i.node_id for i in list_tests(path, source)})
        except TestSourceError:
            continue  # a test file the agent broke: its tests run (and fail) on their own
    together = batch_plan(wanted, batch, visible)
    wanted = [w for w in wanted if w not in set(together)]
    # mutants fixed per task (seeded by its hidden tests), unless the caller draws its own
    seed = None if rng is not None else mutant_seed_of(hidden)
    layout = build_layout(sources, wanted, taken=[*allowed, *hidden, *_snapshot_paths(snapshot)],
                          rng=rng, with_mutants=mutants, mutant_seed=seed,
                          # the agent knows the visible tests already: mutants of the hidden ones
                          # are what it cannot tell apart
                          mutate_files=[f for f in sources if f in hidden] or None)
    # the hidden tests' literal expected values stay here: the test processes send what they
    # computed, and the host compares (proofgym.verify.sandboxed.withheld)
    # (not in a parametrized test: its process runs each check once per case)
    withheld = withhold_layout(one_case_view(layout), [f for f in sources if f in hidden])
    taken = [*allowed, *hidden, *_snapshot_paths(snapshot)]
    canaries = _canaries({p: v[0] for p, v in visible.items()}, together, [*taken, *layout.files],
                         rng, seed, CANARIES)
    run_batch = [*together, *canaries.run]
    (rng or random.SystemRandom()).shuffle(run_batch)
    # the per-test processes lost the mutants of the visible tests that ran there before the
    # batch (a hidden file's): decoys, processes of their own, guard them against a forger of
    # every such process (of a hidden file's tests first: they look like the hidden ones)
    near = [t for t in together if t.split("::", 1)[0] in hidden] or list(together)
    decoys = _canaries(sources, near, [*taken, *layout.files, *canaries.files], rng,
                       seed + b"decoys" if seed is not None else None, DECOYS)
    for gen in decoys.run:
        layout.run.insert((rng or random.SystemRandom()).randint(0, len(layout.run)), gen)
    layout.files.update(decoys.files)
    extra = {p: c for p, c in hidden.items() if p not in sources and p not in layout.files}
    config = next((f"/workspace/{name}" for name in CONFIG_FILES if (snapshot / name).is_file()), None)
    manifest = {"run": layout.run, "several": layout.several, "budget_s": timeout_s,
                "test_timeout_s": test_timeout_s or timeout_s, "batch": run_batch}
    job = encode_job(manifest, [*allowed.items(), *extra.items()], {**layout.files, **canaries.files})
    key = (_identity(snapshot), config, limits, tuple(packages),
           image.digest if image is not None else None)
    # before the hidden tests enter a sandbox (a spare was booted without them): no episode
    # that could profit from them is live on this kernel until that sandbox is gone
    lease = grading_lease(hidden_key_of(hidden, snapshot))
    try:
        runner = WARM.take(key, lambda: _boot_runner(snapshot, config, limits, packages, image))
    except BaseException:
        lease.release()
        raise
    t1 = time.perf_counter()
    proc = runner.booted.proc
    cgroup = runner.booted.home.cgroup
    cpu0 = cgroup.cpu_seconds() if cgroup is not None else None
    sender = threading.Thread(target=_send_job, args=(runner.job_fd, job), daemon=True)
    runner.job_fd = -1  # the sender closes it
    try:
        sender.start()
        report, output, host_timeout = _collect(proc, runner.report_fd,
                                                BACKSTOP * timeout_s + _STARTUP_S)
        report = runner.ready + report
        t2 = time.perf_counter()
        cpu = (cgroup.cpu_seconds() or 0.0) - cpu0 if cgroup is not None and cpu0 is not None else None
    finally:
        runner.discard(then=lease.release)
        sender.join()
    t3 = time.perf_counter()
    timings = {"prepare_s": t1 - t0, "run_s": t2 - t1, "cleanup_s": t3 - t2,
               "total_s": time.perf_counter() - t0}
    if cpu is not None:
        timings["sandbox_cpu_s"] = cpu  # the job's part: a spare's boot is not in it
    if not report.startswith(_READY):
        if host_timeout:
            raise SandboxSetupError("the grading runner did not start within "
                                    f"{_STARTUP_S + BACKSTOP * timeout_s:.0f} s")
        raise SandboxSetupError("the grading runner failed before running any test (exit "
                                f"{proc.returncode}): {output[-2000:]}")
    outcome = _outcome(report[len(_READY):])
    if "setup_error" in outcome:
        raise SandboxSetupError(f"the grading runner could not prepare the workspace: "
                                f"{outcome['setup_error']}")
    if "rejected" in outcome:
        return _rejected(str(outcome["rejected"]), dropped, t0)
    raw, error, messages = parse_report(report[len(_READY):], [*layout.run, *run_batch])
    unobserved: list[str] = []
    if error is None and withheld:
        raw, messages, unobserved = _judge_withheld(raw, messages, withheld,
                                                    _observed(report[len(_READY):], layout.run))
    timings.update(_phases(report[len(_READY):]) if error is None else {})
    changed = _state_changed(report[len(_READY):]) if error is None else None
    whole = _with_batch(layout, together, canaries)
    run = _summarise(whole, raw, error, proc.returncode, host_timeout, output, dropped, timings,
                     changed, unobserved, withheld, (canaries, decoys))
    limit = test_timeout_s or timeout_s
    unmeasured = _cpu_unmeasured(report[len(_READY):]) if run.starved else None
    if run.starved and cpu is None and unmeasured is not None:
        # no CPU group and no count of the sandbox's processes: a test kept waiting by processes
        # of its own that nobody reaps (their CPU time lands in no account) cannot be told from
        # one kept waiting by a busy host, and the code under test must not choose an error
        run = replace(run, starved=False, timed_out=True, failure="tests_timed_out",
                      report_error=("a test ran past its time limit while it waited for a CPU; "
                                    "whether the host or processes of the code under test kept "
                                    "it waiting cannot be told, as the grading sandbox's CPU use "
                                    f"was not measured (no CPU cgroup; {unmeasured}), so the "
                                    "time counts as the test's"))
    if run.starved and cpu is not None and cpu >= limit:
        # the sandbox's CPU group (every process of it, reaped by anyone or not) used a test's
        # whole time limit of CPU: the host did not starve it, the artifact used the time
        run = replace(run, starved=False, timed_out=True, failure="tests_timed_out",
                      report_error=(f"a test ran past its time limit: the grading sandbox used "
                                    f"{cpu:.1f} s of CPU, more than the {limit:g} s limit, while "
                                    "its test waited (its own processes kept it waiting)"))
    if run.results:
        run = replace(run, messages={real: _real_names(messages[gen], gen, real)
                                     for gen, real in whole.real.items() if gen in messages})
    return run


#: Canaries of a batch: mutants of some of its tests (drawn from up to 4 times as many), run with it.
CANARIES = 3


def batch_plan(wanted: Sequence[str], batch: Sequence[str],
               visible: Mapping[str, tuple[bytes, set[str]]]) -> list[str]:
    """The tests of ``batch`` that run together, in ``wanted`` order: those the files as the
    agent sees them (``visible``: path -> source and the test ids it defines) define, run from
    those files. A hidden test (hidden files' own tests, stripped from what the agent sees)
    keeps a process of its own, with its mutant and withheld checks."""
    chosen = set(batch)
    return [w for w in wanted if w in chosen and w in visible.get(w.split("::", 1)[0], ((), set()))[1]]


#: Decoys: mutants of batch tests run as processes of their own among the hidden tests'.
DECOYS = 2


def _canaries(sources: Mapping[str, bytes], together: Sequence[str], taken: Sequence[str],
              rng: random.Random | None, seed: bytes | None, count: int) -> Layout:
    """Up to ``count`` mutants of the batch's tests ``together`` (not parametrized ones), as
    freshly named files beside theirs (what a mutant is:
    :func:`~proofgym.verify.sandboxed.mutants.build_layout`), from ``sources``. Where every one
    of them passes with its test, the processes they ran in reported passes they did not earn:
    tampering (a single one may be a weak mutant honest code passes: mutants of visible tests
    are not vetted like the hidden tests')."""
    if not together:
        return Layout()
    pick = random.Random(seed) if rng is None else rng
    chosen = pick.sample(list(together), min(len(together), 4 * count))
    files = {t.split("::", 1)[0] for t in chosen}
    built = build_layout({f: sources[f] for f in files}, chosen, taken=taken, rng=rng,
                         with_mutants=True, mutant_seed=seed)
    out = Layout()
    for gen in built.run:
        # not a parametrized test's: its mutant may change a case's input, which honest code
        # can pass (a value set and read back)
        if gen in built.mutant and gen not in built.several and len(out.run) < count:
            out.run.append(gen)
            out.mutant[gen] = built.mutant[gen]
            out.files[gen.split("::", 1)[0]] = built.files[gen.split("::", 1)[0]]
            if gen in built.witnesses:
                out.witnesses[gen] = built.witnesses[gen]
    return out


def _with_batch(layout: Layout, together: Sequence[str], canaries: Layout) -> Layout:
    """``layout`` with the batch's tests (each its own id) and its canaries (judged apart:
    :func:`_summarise`)."""
    return replace(layout, real={**layout.real, **{t: t for t in together}},
                   run=[*layout.run, *together, *canaries.run])


def mutant_seed_of(hidden: Mapping[str, bytes]) -> bytes:
    """The seed of a task's mutants (:func:`proofgym.verify.sandboxed.mutants.build_layout`): its hidden
    files, so every grading of the task draws the same mutants."""
    return hashlib.sha256(b"".join(p.encode() + b"\0" + bytes(c) + b"\0"
                                   for p, c in sorted(hidden.items()))).digest()


def _identity(snapshot: Path) -> tuple[str, int, int, int]:
    """The snapshot directory a spare was booted over, not just its path: a tree moved to or
    rebuilt at the same path (a new inode, or at least a new change time) gets its own runner,
    never one that still holds the old tree."""
    st = snapshot.stat()
    return str(snapshot), st.st_dev, st.st_ino, st.st_ctime_ns


def _boot_runner(snapshot: Path, config: str | None, limits: SandboxLimits,
                 packages: Sequence[str], image: SandboxSystem | None = None) -> Runner:
    """A fresh grading sandbox whose runner loads pytest, then waits for its job."""
    report_r, report_w = os.pipe()
    job_r, job_w = os.pipe()
    python = image.python if image is not None else "/opt/python/bin/python3"
    guard = {"protects": list(GRADING_PROTECTED_PIDS),
             "filter": guard_program(GRADING_PROTECTED_PIDS).hex()}
    argv = [python, "-I", "-B", "-c", _RUNNER, str(report_w), str(job_r), config or "",
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


def _send_job(fd: int, job: bytes) -> None:
    """Write the job and close; a runner that died first (the host sees no report) ends it."""
    view = memoryview(job)
    try:
        while view:
            view = view[os.write(fd, view[:1 << 20]):]
    except BrokenPipeError:
        view = view[:0]
    finally:
        os.close(fd)


def _outcome(data: bytes) -> dict:
    """The report's top-level object when it is a rejection or a setup error, else ``{}``."""
    try:
        report = json.loads(data)
    except ValueError:
        return {}
    if isinstance(report, dict) and ({"rejected", "setup_error"} & set(report)) and \
            "results" not in report:
        return report
    return {}


def _observed(data: bytes, expected: Sequence[str]) -> dict[str, str]:
    """What the withheld checks of each passed test observed (JSON text, by generated id)."""
    value = json.loads(data).get("observed")
    if not isinstance(value, dict):
        return {}
    return {k: v for k, v in value.items() if k in expected and isinstance(v, str)}


def _judge_withheld(raw: Mapping[str, str], messages: Mapping[str, str],
                    withheld: Mapping[str, list], observed: Mapping[str, str]
                    ) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """A test whose process passed passes only if its withheld checks hold, here: each observed
    as its code runs it and true against its literal; else it failed, with why. Also the
    generated ids whose checks were not observed as written (tampering)."""
    raw, messages = dict(raw), dict(messages)
    passed = {g: e for g, e in withheld.items() if raw.get(g) == "passed"}
    unobserved = []
    for gen, verdict in verdicts(passed, observed).items():
        if verdict is not None:
            raw[gen] = "failed"
            messages[gen] = verdict[1]
            if verdict[0] == "unobserved":
                unobserved.append(gen)
    return raw, messages, unobserved


def _state_changed(data: bytes) -> str | None:
    """What a test process changed in the runner that it could not put back, if anything."""
    value = json.loads(data).get("state_changed")
    return value if isinstance(value, str) and value else None


def _cpu_unmeasured(data: bytes) -> str | None:
    """Why the runner could not count its sandbox's CPU time, if it could not."""
    value = json.loads(data).get("cpu_unmeasured")
    return value[:200] if isinstance(value, str) and value else None


def _phases(data: bytes) -> dict[str, float]:
    """The runner's CPU and wall seconds per phase (informative: for benches, never a grade)."""
    value = json.loads(data).get("phases")
    if not isinstance(value, dict):
        return {}
    return {k: float(v) for k, v in value.items()
            if isinstance(k, str) and k.startswith("runner_") and isinstance(v, (int, float))}


def _real_names(message: str, generated: str, real: str) -> str:
    """A test's message with its generated file, class and function names put back."""
    for gen_part, real_part in zip(generated.split("::"), real.split("::"), strict=False):
        message = message.replace(gen_part, real_part)
    return message


def _summarise(layout: Layout, raw: Mapping[str, str], error: str | None, exit_code: int | None,
               host_timeout: bool, output: str, dropped: Sequence[str],
               timings: Mapping[str, float], changed: str | None = None,
               unobserved: Sequence[str] = (), withheld: Mapping[str, list] | None = None,
               groups: Sequence[Layout] = ()) -> TestRun:
    common = dict(exit_code=exit_code, output=output, dropped=tuple(sorted(dropped)),
                  timings=dict(timings), mutants=len(layout.mutant),
                  unmutable=tuple(layout.unmutable),
                  withheld=tuple(sorted({layout.real[g] for g in withheld or {} if g in layout.real})),
                  canaries=len(groups[0].mutant) if groups else 0,
                  decoys=len(groups[1].mutant) if len(groups) > 1 else 0)
    if error is not None:
        why = (f"the test run did not finish within its time limit: {error}" if host_timeout
               else f"the test run was cut short by the code under test: {error}")
        return TestRun({}, timed_out=host_timeout, report_error=why, tampered=False,
                       failure="tests_timed_out" if host_timeout else "runner_killed", **common)
    results = {real: raw[gen] for gen, real in layout.real.items()}
    # a mutant passing alone is wrong code that happens to give the mutant's value (a buggy
    # count of 0 where the test wants 1 and the mutant 0); a mutant passing *with* its test is
    # impossible for code that computes anything: both were made to pass
    # (a mutant built from what another test shows counts only where that test passed too)
    passed = sorted(of for g, of in layout.mutant.items()
                    if raw[g] == "passed" and results.get(of) == "passed"
                    and all(results.get(w) == "passed" for w in layout.witnesses.get(g, ())))
    # the batch's canaries, the decoys: a forger of every process they ran in passes every one
    # (an honest one may pass a weak mutant of a visible test, never checked like a hidden one's)
    for group in groups:
        sung = sorted(of for g, of in group.mutant.items()
                      if raw[g] == "passed" and results.get(of) == "passed"
                      and all(results.get(w) == "passed" for w in group.witnesses.get(g, ())))
        if group.mutant and len(sung) == len(group.mutant):
            passed = sorted({*passed, *sung})
    timed_out = any(s == "timeout" for s in raw.values())
    if changed is not None:
        return TestRun({}, timed_out=False, tampered=True, failure="tampering_detected",
                       report_error=("tampering: a test process changed the grading runner's "
                                     f"{changed}, which the runner could not put back before the "
                                     "next test; the remaining tests did not run"), **common)
    if unobserved:
        which = sorted({layout.real.get(g) or layout.mutant[g] for g in unobserved})
        return TestRun({}, timed_out=timed_out, tampered=True, failure="tampering_detected",
                       report_error=("tampering: these tests passed without running their own "
                                     f"withheld checks as written (or their mutants did): {which}"),
                       **common)
    if passed:
        return TestRun({}, timed_out=timed_out, tampered=True, mutants_passed=len(passed),
                       report_error=("tampering: these tests passed and so did their mutants (the "
                                     f"same test with an expected value changed): {passed}"),
                       failure="tampering_detected", **common)
    if any(s == "starved" for s in raw.values()):
        return TestRun({}, timed_out=False, tampered=False, failure="host_busy", starved=True,
                       report_error=("the host was too busy to judge: a test got less CPU than its "
                                     f"time limit in {BACKSTOP:g} times that limit of wall time "
                                     "(grade it again on a quieter host)"), **common)
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
            kill_sandbox(proc)
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
            kill_sandbox(proc)
    proc.stdout.close()
    return bytes(report), output.decode("utf-8", errors="replace"), timed_out


def swebench_verdict(run: TestRun, fail_to_pass: Sequence[str], pass_to_pass: Sequence[str],
                     *, grader: str | None = None) -> Verdict:
    """Reward 1 exactly when every FAIL_TO_PASS test passed and every PASS_TO_PASS test still
    passes (a test missing from the report has not passed) and no mutant passed. A run that
    could not be graded on its tests is a scored 0 with the cause as a component, except a run
    the host starved of CPU (``run.starved``): that is a grader error (``status="error"``,
    not a grade: grade it again), never a 0. ``reason`` says why (the cause, or which tests did
    not pass and their failure messages)."""
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
        "tests_without_mutant": float(len(run.unmutable)), "canaries": float(run.canaries),
        "decoys": float(run.decoys),
        "tests_unguarded": float(len(run.unguarded)),
        "grading_overhead_s": run.timings.get("total_s", 0.0) - run.timings.get("run_s", 0.0),
        "test_run_s": run.timings.get("run_s", 0.0),
    }
    if "sandbox_cpu_s" in run.timings:  # the grading sandbox's CPU (its cgroup's; root only)
        metrics["sandbox_cpu_s"] = run.timings["sandbox_cpu_s"]
    if run.starved:
        return Verdict.failed(run.report_error or "the host was too busy to judge",
                              grader=grader, **metrics)
    components = {"resolved": float(resolved)}
    if run.failure is not None:
        components[run.failure] = 0.0
    return Verdict(float(resolved), components, metrics, grader=grader,
                   reason=explain(run, fail_to_pass, pass_to_pass))


_MAX_REASON = 4000


def explain(run: TestRun, fail_to_pass: Sequence[str], pass_to_pass: Sequence[str]) -> str:
    """One paragraph on a run's outcome: its failure cause, or the tests that did not pass with
    the tail of each one's failure message (bounded in size)."""
    if run.report_error is not None:
        return run.report_error
    wanted = [*fail_to_pass, *pass_to_pass]
    failed = [t for t in wanted if run.results.get(t) != "passed"]
    if not failed:
        return f"all {len(fail_to_pass)} FAIL_TO_PASS and {len(pass_to_pass)} PASS_TO_PASS tests passed"
    lines = [f"{len(failed)} of {len(wanted)} tests did not pass:"]
    for test in failed:
        kind = "FAIL_TO_PASS" if test in fail_to_pass else "PASS_TO_PASS"
        lines.append(f"- {test} ({kind}): {run.results.get(test, 'not run')}")
        message = run.messages.get(test, "").strip()
        if message:
            lines += ["    " + line for line in message.splitlines()[-6:]]
    text = "\n".join(lines)
    return text if len(text) <= _MAX_REASON else text[:_MAX_REASON] + "\n[... cut]"
