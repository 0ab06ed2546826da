"""The verdict policy of isolated grading: what a runner's results mean.

:func:`summarise` turns the results by generated id into a :class:`TestRun`: who caused a
failure decides what it is (a mutant or canary that passes with its test, a withheld check not
run as written, a runner state a test could not put back: tampering; a starved test: the host's
fault, which :func:`judge_starved` keeps only where the sandbox's CPU use was measured; a
timeout; a report cut short). :func:`swebench_verdict` turns a :class:`TestRun` into a
:class:`~proofgym.core.Verdict` (SWE-bench semantics), :func:`explain` says why in one paragraph.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from proofgym.core import Verdict
from proofgym.verify.sandboxed.mutants import Layout
from proofgym.verify.sandboxed.protocol import BACKSTOP
from proofgym.verify.sandboxed.withheld import verdicts


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
    #: real test id -> its withheld checks whose computed value was no plain data (it failed
    #: them): what a task's reference run lists as ``unwithheld`` (``observed.unplain``)
    unplain: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


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
        """Whether any test is guarded (a mutant, or a withheld check): a task none of whose
        tests is cannot detect tampering, a grader error (``CodeRepairTask.verify``). Decoys do
        not count: a mutant of a visible test is told from a hidden test by comparing it with
        the visible tests (``tests/security/test_attack_decoy_shapes.py``)."""
        return self.mutants > 0 or bool(self.withheld)


def judge_withheld(raw: Mapping[str, str], messages: Mapping[str, str],
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


def real_names(message: str, generated: str, real: str) -> str:
    """A test's message with its generated file, class and function names put back."""
    for gen_part, real_part in zip(generated.split("::"), real.split("::"), strict=False):
        message = message.replace(gen_part, real_part)
    return message


def summarise(layout: Layout, raw: Mapping[str, str], error: str | None, exit_code: int | None,
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


def rejected_run(reason: str, dropped: Sequence[str], t0: float) -> TestRun:
    return TestRun({}, None, False, reason, False, "", tuple(sorted(dropped)),
                   {"total_s": time.perf_counter() - t0}, failure="artifact_rejected")


def judge_starved(run: TestRun, cpu: float | None, limit: float, unmeasured: str | None) -> TestRun:
    """A starved run (``run.starved``: a test past its time limit that got less CPU than the
    limit) stands only where the grading sandbox's CPU use was measured and fell short of the
    limit: ``cpu`` (its CPU group's seconds, or ``None``: no group), ``unmeasured`` (why the
    runner could not count its processes' CPU either, or ``None``). Otherwise the time counts
    as the test's: a scored timeout with the reason."""
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
    return run
