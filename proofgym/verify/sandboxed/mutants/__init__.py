"""Tamper detection by mutants: test items listed from source, mutated, renamed and shuffled.

Code under test shares a process with the test it is checked by, so anything that process reports
can be forged (a patched runner, an import hook that swaps test functions, results whose
``__eq__`` is always true, ``os._exit(0)``). A *mutant* is the same test with one expected value
changed; no code that computes a value passes both a test and its mutant. This catches forgery
that passes every test. Every grading lays out each test, real or mutant, alone in a freshly
named file with a freshly named function, in a random order; the mapping back to the real test
ids stays on the host, and a test process sees only its own file
(``proofgym/programs/pytest_runner.py``). A run in which a mutant passes together with its test
was tampered with.

Mutants are drawn to look like the task's real tests (``mutate_test`` lists the kinds in order):
a changed expected value is drawn from the values of the same kind that the task's test files
hold (visible and hidden) and, where the test's values allow one, keeps the real value's sign,
digit count, float repr length, string length and character classes (or is a whole input, or
made of input words), whether it occurs among the test's inputs, and the order and distinctness
of the list it sits in; no mutant negates an assert. Tests without an expected value to change
get a mutant of their own kind: ``pytest.raises`` tests a returning input (one another test
shows returning), a changed ``match=`` pattern or an unrelated builtin exception type; ``assert
f(...)`` the arguments of an opposite check of ``f``; helper-style tests (``check(candidate)``)
a changed expected value in the helper; and a test with none of these a changed copy of another
test's check, or of another whole test of its file, put first. A mutant built from what another
test shows (a returning input, another test's check) names that test in ``Layout.witnesses``:
its pass with its test means tampering only where that test passes too (wrong code that fails it
may pass both honestly). A test that none of these applies to has no mutant: :class:`Layout`
lists it in ``unmutable`` (and ``TestRun.unmutable``, the ``tests_without_mutant`` metric); a
test with a withheld check is guarded without one (``TestRun.guarded``), and a task none of whose
tests is guarded is a grader error (``CodeRepairTask.verify``). unittest checks count as asserts
(``self.assertEqual(a, b)`` and its equality kin, a project's own ``self.assert*(a, b)``, as
``assert a == b``; ``assertTrue``/``assertFalse`` as truth checks), and a parametrized test's
mutant changes one case's expected value. Every mutant
must fail where its test passes: a mutant that correct code passes would flag an honest solution
as tampering.

What holds, and its tests: every hidden test of every bundled CodeRepair task gets a mutant, none
negates a check, and every mutant fails with the reference fix while every test passes
(``tests/security/test_attack_mutant_classifier.py``); the red team's classifier
(``bench/mutant_classifier.py``: values absent from the inputs, negatives, long floats, negated
checks, impossible dates, unseen exception types, inserted checks) resolves the bundled tasks no
more often than a coin per pair, 2^-k for k mutated hidden tests (same file), and a guess from a
test's value alone does no better (``tests/security/test_attack_mutant_pairs.py``). Not
indistinguishable: an inserted check (the last resort) and a value no other value could replace
with the same relation to the inputs (a csv line whose only letter, ``x``, is also the expected
field) still tell a few pairs apart (see "Grading" in ``docs/threat-model.md``).

Where a hidden check compares with a literal, the grading withholds that literal from the test
process altogether (:mod:`proofgym.verify.sandboxed.withheld`: the host compares what the test
sent), so neither a test's nor its mutant's value can be read or judged there; mutants matter for
the checks that cannot be withheld (in an ``if`` without ``else``, helpers, against non-literal
values), ``pytest.raises`` and truth checks, and forged passes of everything else.

Tests are listed from the files' AST, never by importing them (importing runs the code under
test). Test functions are ``test*`` functions at module level (a parametrized one is one test:
its process runs all its cases) and the own ``test*`` methods of the classes pytest collects
(:func:`collected_classes`: ``Test*`` classes without ``__init__`` and any ``unittest.TestCase``
subclass, whatever its name).
"""

from proofgym.core.errors import TestSourceError
from proofgym.verify.sandboxed.mutants.layout import Layout, build_layout
from proofgym.verify.sandboxed.mutants.listing import TestItem, collected_classes, list_tests
from proofgym.verify.sandboxed.mutants.mutator import mutate_test
from proofgym.verify.sandboxed.mutants.values import MutationPool, build_pool

__all__ = ["Layout", "MutationPool", "TestItem", "TestSourceError", "build_layout", "build_pool",
           "collected_classes", "list_tests", "mutate_test"]
