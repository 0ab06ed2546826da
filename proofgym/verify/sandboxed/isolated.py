"""Grading code in a fresh sandbox, out of the agent's reach (SWE-bench semantics).

The artifact is checked, then applied over the read-only task snapshot in a *new* sandbox.
Changes to protected paths (tests, pytest configuration files of any name pytest reads, any
``conftest.py``) are dropped, so those files are exactly the snapshot's. The tests to run, and
one mutant of each (:mod:`proofgym.verify.sandboxed.mutants`), are written as freshly named single-test
files in a random order; the hidden tests' own files never enter the sandbox, and their checks
against a literal arrive with the literal withheld (:mod:`proofgym.verify.sandboxed.withheld`: the
test process sends what it computed, the host compares); the snapshot's modules come with their
bytecode (:mod:`proofgym.verify.sandboxed.bytecode`), so test processes do not compile them each
again. The runner
(``proofgym/programs/pytest_runner.py``, booted ahead when a spare is ready:
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

import ast
import hashlib
import random
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path, PurePosixPath

from proofgym.runtimes.grading_lease import grading_lease, hidden_key_of
from proofgym.runtimes.sandbox import (
    PYTEST_PACKAGES,
    SandboxLimits,
    SandboxSetupError,
    SandboxSystem,
)
from proofgym.tasks.synth.hiding import definition
from proofgym.verify.sandboxed import protocol
from proofgym.verify.sandboxed.bytecode import snapshot_bytecode, staged_bytecode
from proofgym.verify.sandboxed.guards import one_case_view
from proofgym.verify.sandboxed.mutants import Layout, TestSourceError, build_layout, list_tests
from proofgym.verify.sandboxed.policy import (
    TestRun,
    explain,
    judge_starved,
    judge_withheld,
    real_names,
    rejected_run,
    summarise,
    swebench_verdict,
)
from proofgym.verify.sandboxed.protocol import (
    BACKSTOP,
    READY,
    STARTUP_S,
    RunnerReport,
    boot_runner,
    collect,
    encode_job,
)
from proofgym.verify.sandboxed.warm_runners import WARM
from proofgym.verify.sandboxed.withheld import unplain, withhold_layout
from proofgym.verify.sandboxed.workspace import (
    ALWAYS_PROTECTED,
    CONFIG_FILES,
    DEFAULT_PROTECTED,
    check_artifact,
    files_under,
    is_protected,
    split_changes,
)

__all__ = ["ALWAYS_PROTECTED", "CONFIG_FILES", "DEFAULT_PROTECTED", "TestRun", "check_artifact",
           "explain", "files_under", "is_protected", "run_tests_isolated", "swebench_verdict"]


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
                       batch: Sequence[str] = (),
                       unwithheld: Mapping[str, Sequence[str]] | None = None) -> TestRun:
    """Run the tests ``tests`` (node ids ``file::[Class::]name``, or whole files) and a mutant
    of each in a fresh sandbox holding ``snapshot`` plus the allowed ``changes`` plus ``hidden``
    files; ``timeout_s`` bounds the whole run, ``test_timeout_s`` each test, both in the tests'
    own time (wall time less the time the host kept them waiting for a CPU); in wall time a run
    may take up to ``BACKSTOP`` times ``timeout_s`` (plus the sandbox's start) on a busy host.
    With ``image`` the sandbox runs on that environment image (its interpreter runs the tests)
    instead of the minimal system with ``packages``.

    ``batch``: test ids (of ``tests``) that run together in one test process, from their own
    files, after the others (:func:`batch_plan`: the tests the agent can read; a hidden test
    keeps its own process), in a native run's order (:func:`native_order`: a unittest class
    set up once, its tests by name), with up to :data:`CANARIES` mutants of them (canaries): a batch
    process that reports passes it did not earn, for all its tests alike, passes every canary
    with its test, which is tampering. Its time limit is what is left of ``timeout_s``.

    ``unwithheld``: hidden test id -> checks of it that stay asserts (the task's record says
    which: ``withheld.withhold_source``'s ``keep``).

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
        return rejected_run(f"the artifact cannot be applied: {problem}", dropped, t0)
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
    withheld = withhold_layout(one_case_view(layout), [f for f in sources if f in hidden],
                               unwithheld)
    taken = [*allowed, *hidden, *_snapshot_paths(snapshot)]
    canaries = _canaries({p: v[0] for p, v in visible.items()}, together, [*taken, *layout.files],
                         rng, seed, CANARIES, sure_failing=True)
    run_batch = native_order([*together, *canaries.run])
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
    # by path (fresh, random): every test process holds the runner's list of them, and in the
    # order built (hidden tests', then decoys', then canaries') a process knew it ran a decoy
    # (tests/security/test_attack_job_order.py)
    identity = _identity(snapshot)
    # the snapshot's modules compiled once here (the sandbox's interpreter is this one), not
    # by every test process again (proofgym.verify.sandboxed.bytecode)
    pyc = staged_bytecode(snapshot_bytecode(snapshot, identity), [*allowed, *extra]) \
        if image is None or image.host_python else {}
    job = encode_job(manifest, [*allowed.items(), *extra.items(), *pyc.items()],
                     dict(sorted({**layout.files, **canaries.files}.items())))
    key = (identity, config, limits, tuple(packages), image.digest if image is not None else None)
    # before the hidden tests enter a sandbox (a spare was booted without them): no episode
    # that could profit from them is live on this kernel until that sandbox is gone
    lease = grading_lease(hidden_key_of(hidden, snapshot))
    try:
        runner = WARM.take(key, lambda: boot_runner(snapshot, config, limits, packages, image))
    except BaseException:
        lease.release()
        raise
    t1 = time.perf_counter()
    proc = runner.booted.proc
    cgroup = runner.booted.home.cgroup
    cpu0 = cgroup.cpu_seconds() if cgroup is not None else None
    sender = threading.Thread(target=protocol.send_job, args=(runner.job_fd, job), daemon=True)
    runner.job_fd = -1  # the sender closes it
    try:
        sender.start()
        report, output, host_timeout = collect(proc, runner.report_fd, BACKSTOP * timeout_s + STARTUP_S)
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
    if not report.startswith(READY):
        if host_timeout:
            raise SandboxSetupError("the grading runner did not start within "
                                    f"{STARTUP_S + BACKSTOP * timeout_s:.0f} s")
        raise SandboxSetupError("the grading runner failed before running any test (exit "
                                f"{proc.returncode}): {output[-2000:]}")
    parsed = RunnerReport.parse(report[len(READY):], [*layout.run, *run_batch])
    if "setup_error" in parsed.outcome:
        raise SandboxSetupError(f"the grading runner could not prepare the workspace: "
                                f"{parsed.outcome['setup_error']}")
    if "rejected" in parsed.outcome:
        return rejected_run(str(parsed.outcome["rejected"]), dropped, t0)
    raw, error, messages = parsed.results, parsed.error, parsed.messages
    unobserved: list[str] = []
    objects: dict[str, tuple[str, ...]] = {}
    if error is None and withheld:
        observed = {k: v for k, v in parsed.observed.items() if k in layout.run}
        raw, messages, unobserved = judge_withheld(raw, messages, withheld, observed)
        objects = {layout.real[g]: c for g, c in unplain(withheld, observed).items()
                   if g in layout.real}
    timings.update(parsed.phases)
    whole = _with_batch(layout, together, canaries)
    run = summarise(whole, raw, error, proc.returncode, host_timeout, output, dropped, timings,
                    parsed.state_changed, unobserved, withheld, (canaries, decoys))
    run = judge_starved(run, cpu, test_timeout_s or timeout_s, parsed.cpu_unmeasured)
    if run.results:
        run = replace(run, messages={real: real_names(messages[gen], gen, real)
                                     for gen, real in whole.real.items() if gen in messages},
                      unplain=objects)
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


def native_order(ids: Sequence[str]) -> list[str]:
    """``ids`` by file in the order a native pytest run walks them (each directory's entries by
    name), a file's own in the given order: the batch's runner collects each of its files whole
    and runs them in this file order (a canary's freshly named file falls among them by its
    name, as a native run would place it)."""
    return sorted(ids, key=lambda t: PurePosixPath(t.split("::", 1)[0]).parts)


#: Decoys: mutants of batch tests run as processes of their own among the hidden tests'.
DECOYS = 2


def _canaries(sources: Mapping[str, bytes], together: Sequence[str], taken: Sequence[str],
              rng: random.Random | None, seed: bytes | None, count: int,
              sure_failing: bool = False) -> Layout:
    """Up to ``count`` mutants of the batch's tests ``together`` (not parametrized ones), as
    freshly named files beside theirs (what a mutant is:
    :func:`~proofgym.verify.sandboxed.mutants.build_layout`), from ``sources``; where none can
    be drawn and ``sure_failing``, one copy of a test that fails first. Where every one of them
    passes with its test, the processes they ran in reported passes they did not earn:
    tampering (a single one may be a weak mutant honest code passes: mutants of visible tests
    are not vetted like the hidden tests')."""
    if not together:
        return Layout()
    pick = random.Random(seed) if rng is None else rng
    chosen = pick.sample(list(together), min(len(together), 4 * count))
    files = {f: sources[f] for f in {t.split("::", 1)[0] for t in chosen}}
    # not a parametrized test's: its mutant may change a case's input, which honest code can
    # pass (a value set and read back)
    several = {i.node_id for f, source in files.items() for i in list_tests(f, source) if i.parametrized}
    # the mutants of the first of them (in the drawn order) that have one, up to count: those
    # of the rest would never run (building them was most of a grading's own CPU on the host)
    built = build_layout(files, [t for t in chosen if t not in several], taken=taken, rng=rng,
                         with_mutants=True, mutant_seed=seed, mutants_only=count)
    out = Layout()
    for gen in built.run:
        if gen in built.mutant and len(out.run) < count:
            out.run.append(gen)
            out.mutant[gen] = built.mutant[gen]
            out.files[gen.split("::", 1)[0]] = built.files[gen.split("::", 1)[0]]
            if gen in built.witnesses:
                out.witnesses[gen] = built.witnesses[gen]
    if sure_failing and not out.run:
        # no mutant to draw from (parametrized tests only, or none a mutant fits): without a
        # canary, code that reports every test of a many-item session passed needs no
        # knowledge of the task; a copy of a test that fails first, which no honest process
        # passes, catches it (tests/security/test_attack_batch_without_canary.py)
        built = build_layout(files, chosen, taken=taken, rng=rng, with_mutants=False)
        for gen in (g for g in built.run if g in built.real):
            path = gen.split("::", 1)[0]
            failing = _failing_first(built.files[path], gen.split("::")[1:])
            if failing is not None:  # not a test its file imports from another
                out.run.append(gen)
                out.mutant[gen] = built.real[gen]
                out.files[path] = failing
                break
    return out


def _failing_first(source: bytes, names: Sequence[str]) -> bytes | None:
    """``source`` with the test ``names`` (``[Class, ]function``) failing before anything else,
    or ``None`` where the file does not define it (a test imported from another module)."""
    tree = ast.parse(source)
    node = definition(tree.body, names)
    if node is None:
        return None
    node.body.insert(0, ast.Assert(test=ast.Constant(False)))
    return (ast.unparse(ast.fix_missing_locations(tree)) + "\n").encode()


def _with_batch(layout: Layout, together: Sequence[str], canaries: Layout) -> Layout:
    """``layout`` with the batch's tests (each its own id) and its canaries (judged apart:
    :func:`~proofgym.verify.sandboxed.policy.summarise`)."""
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


def _snapshot_paths(snapshot: Path) -> list[str]:
    return [p.relative_to(snapshot).as_posix() for p in snapshot.rglob("*")]


