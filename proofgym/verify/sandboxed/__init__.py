"""Sandboxed grading: the agent's changes applied to a snapshot and graded in a fresh sandbox.

Two entry points: :func:`run_tests_isolated` (pytest, one forked process per test, with mutants
that detect a pass the tests did not earn) and :func:`run_program` (any program, proving that its
last statement ran). The runner that executes inside the sandbox is :mod:`.runner`.
"""

from proofgym.runtimes.sandbox import SandboxSetupError
from proofgym.verify.sandboxed.guards import guarded_tests
from proofgym.verify.sandboxed.isolated import (
    TestRun,
    explain,
    mutant_seed_of,
    run_tests_isolated,
    swebench_verdict,
    test_sources,
)
from proofgym.verify.sandboxed.mutants import TestSourceError
from proofgym.verify.sandboxed.program import MAX_PROGRAM_OUTPUT, ProgramRun, run_program, run_pytest
from proofgym.verify.sandboxed.warm_runners import keep_no_spares
from proofgym.verify.sandboxed.workspace import (
    ALWAYS_PROTECTED,
    CONFIG_FILES,
    DEFAULT_PROTECTED,
    ArtifactRejected,
    check_artifact,
    files_under,
    is_protected,
)

__all__ = [
    "ALWAYS_PROTECTED",
    "CONFIG_FILES",
    "DEFAULT_PROTECTED",
    "MAX_PROGRAM_OUTPUT",
    "ArtifactRejected",
    "ProgramRun",
    "SandboxSetupError",
    "TestRun",
    "TestSourceError",
    "check_artifact",
    "explain",
    "files_under",
    "guarded_tests",
    "is_protected",
    "keep_no_spares",
    "mutant_seed_of",
    "run_program",
    "run_pytest",
    "run_tests_isolated",
    "swebench_verdict",
    "test_sources",
]
