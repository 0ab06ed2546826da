"""The public sandboxed-grading API: run_program, run_pytest's failure messages, Verdict.reason."""

from __future__ import annotations

from pathlib import Path

import pytest

import proofgym
from proofgym.core import Verdict
from proofgym.verify.sandboxed import swebench_verdict
from proofgym.verify.sandboxed.program import MAX_PROGRAM_OUTPUT, run_program, run_pytest
from tests.conftest import require_tool

pytestmark = pytest.mark.sandbox


@pytest.fixture
def snap(tmp_path: Path) -> Path:
    (tmp_path / "app.py").write_text("def add(a, b):\n    return a - b\n")
    (tmp_path / "notes.txt").write_text("snapshot notes\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_app.py").write_text(
        "from app import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
        "def test_zero():\n    assert add(0, 0) == 0\n")
    return tmp_path


def test_run_program_judges_output_and_exit_code_over_snapshot_changes_and_hidden(snap: Path):
    require_tool("bwrap")
    check = b"import sys\nfrom app import add\nprint(add(*map(int, sys.stdin.read().split())))\n"
    wrong = run_program(snap, {}, argv=["python3", "check.py"], stdin=b"2 3",
                        hidden={"check.py": check}, timeout_s=30)
    assert wrong.ok and wrong.stdout == b"-1\n" and wrong.failure is None
    fixed = run_program(snap, {"app.py": b"def add(a, b):\n    return a + b\n"},
                        argv=["python3", "check.py"], stdin=b"2 3", hidden={"check.py": check},
                        timeout_s=30)
    assert fixed.stdout_text == "5\n" and fixed.exit_code == 0
    failing = run_program(snap, {}, argv=["python3", "-c", "import sys; sys.stderr.write('bad'); "
                                          "sys.exit(3)"], timeout_s=30)
    assert failing.exit_code == 3 and failing.stderr == b"bad" and not failing.ok


def test_run_program_restores_protected_paths_applies_deletions_and_hides_nothing_else(snap: Path):
    require_tool("bwrap")
    run = run_program(snap, {"tests/test_app.py": b"def test_add():\n    pass\n", "notes.txt": None,
                             "new.txt": b"agent\n"},
                      argv=["bash", "-c", "cat tests/test_app.py | head -1; ls; id -u"],
                      timeout_s=30)
    assert run.dropped == ("tests/test_app.py",)
    lines = run.stdout_text.splitlines()
    assert lines[0] == "from app import add"  # the snapshot's test, not the agent's
    assert "new.txt" in lines and "notes.txt" not in lines and "app.py" in lines
    assert lines[-1] != "0"  # never root in there


def test_run_program_time_limit_output_bound_and_no_network(snap: Path):
    require_tool("bwrap")
    slow = run_program(snap, {}, argv=["bash", "-c", "echo started; sleep 60"], timeout_s=1.5)
    assert slow.timed_out and slow.failure == "timed_out" and slow.exit_code is None
    assert slow.stdout == b"started\n"
    loud = run_program(snap, {}, argv=["python3", "-c", f"print('x' * {3 * MAX_PROGRAM_OUTPUT})"],
                       timeout_s=30)
    assert loud.truncated and len(loud.stdout) == MAX_PROGRAM_OUTPUT and loud.exit_code == 0
    net = run_program(snap, {}, argv=["python3", "-c",
                                      "import socket; socket.create_connection(('1.1.1.1', 80), 3)"],
                      timeout_s=30)
    assert net.exit_code == 1 and b"Network is unreachable" in net.stderr


def test_run_program_rejects_an_artifact_that_cannot_be_applied(snap: Path):
    run = run_program(snap, {"a": b"file", "a/b": b"under a file"}, argv=["true"], timeout_s=30)
    assert run.failure == "artifact_rejected" and "lies under" in (run.detail or "")
    with pytest.raises(TypeError, match="argv"):
        run_program(snap, {}, argv=[], timeout_s=30)


def test_run_pytest_reports_each_failing_test_with_its_message_under_its_real_name(snap: Path):
    require_tool("bwrap")
    ids = ["tests/test_app.py::test_add", "tests/test_app.py::test_zero"]
    run = run_pytest(snap, {}, tests=ids, hidden={}, timeout_s=60)
    assert run.results == {ids[0]: "failed", ids[1]: "passed"}
    message = run.messages[ids[0]]
    assert "assert -1 == 5" in message and "tests/test_app.py" in message and "test_add" in message
    assert ids[1] not in run.messages
    verdict = swebench_verdict(run, [ids[0]], [ids[1]])
    assert verdict.status == "scored" and verdict.reward == 0.0 and verdict.error is None
    assert ids[0] in verdict.reason and "assert -1 == 5" in verdict.reason
    fixed = run_pytest(snap, {"app.py": b"def add(a, b):\n    return a + b\n"}, tests=ids,
                       timeout_s=60)
    assert fixed.messages == {} and swebench_verdict(fixed, [ids[0]], [ids[1]]).reward == 1.0


def test_verdict_reason_round_trips_and_old_records_still_load():
    v = Verdict(0.0, {"resolved": 0.0}, reason="2 of 3 tests did not pass")
    assert Verdict.from_dict(v.to_dict()) == v
    old = v.to_dict()
    del old["reason"]
    assert Verdict.from_dict(old).reason is None


def test_the_api_is_exported_from_proofgym():
    assert proofgym.run_pytest is run_pytest and proofgym.run_program is run_program
    assert {"run_pytest", "run_program", "TestRun", "ProgramRun"} <= set(proofgym.__all__)


def test_a_change_through_a_snapshot_symlink_never_reaches_the_protected_file(snap: Path):
    """The runner writes the artifact inside the sandbox: a symlink of the snapshot's in the way
    (``tests_link -> tests``) is replaced, as an overlay's upper layer would hide it, never
    followed into the protected ``tests/``."""
    require_tool("bwrap")
    (snap / "tests" / "helpers.py").write_text("EXPECTED = 5\n")
    (snap / "tests" / "test_app.py").write_text(
        "from app import add\nfrom helpers import EXPECTED\n\n\n"
        "def test_add():\n    assert add(2, 3) == EXPECTED\n")
    (snap / "tests_link").symlink_to("tests")
    ids = ["tests/test_app.py::test_add"]
    honest = run_pytest(snap, {}, tests=ids, timeout_s=60)
    assert honest.results == {ids[0]: "failed"}  # add() subtracts
    forged = run_pytest(snap, {"tests_link/helpers.py": b"EXPECTED = -1\n"}, tests=ids,
                        timeout_s=60)
    assert forged.results == {ids[0]: "failed"}, forged.messages


def test_a_snapshot_graded_again_gets_a_prebooted_runner_taken_once(snap: Path, monkeypatch):
    require_tool("bwrap")
    from proofgym.verify.sandboxed import isolated
    from proofgym.verify.sandboxed.warm_runners import WarmRunners

    # spares of this test alone: the process's own (WARM) may hold spares, or boots still under
    # way, that earlier tests in this worker left, and boots under way count against the cap, so
    # a spare for this snapshot might not be booted at all, or only after theirs
    warm = WarmRunners(max_spares=2)
    monkeypatch.setattr(isolated, "WARM", warm)
    ids = ["tests/test_app.py::test_add"]

    def spares() -> list:  # a key starts with the snapshot's identity: (path, dev, inode, ctime)
        return [r for key, rs in warm._spares.items() if key[0][0] == str(snap) for r in rs]

    def booted() -> None:
        """Wait until every spare boot asked for so far has ended (one boot thread, in order);
        the bound only keeps a hung boot from hanging the test."""
        warm._boot.submit(lambda: None).result(timeout=300)

    try:
        run_pytest(snap, {}, tests=ids, timeout_s=60)
        booted()
        # graded once: no spare (a run over many tasks graded once each would discard them all)
        assert not spares() and warm.stats["spares_booted"] == 0
        run_pytest(snap, {}, tests=ids, timeout_s=60)  # graded again: a spare boots for the next
        booted()
        assert spares(), f"no spare was booted for the snapshot: {warm.last_boot_error or warm.stats}"
        before, taken = dict(warm.stats), spares()
        run = run_pytest(snap, {"app.py": b"def add(a, b):\n    return a + b\n"}, tests=ids,
                         timeout_s=60)
        assert run.results == {ids[0]: "passed"}
        assert warm.stats["warm"] == before["warm"] + 1 and warm.stats["cold"] == before["cold"]
        booted()
        spare = spares()
        assert not [r for r in spare if any(r is t for t in taken)], "a used runner is a spare again"
        assert all(r.booted.proc.poll() is None for r in spare)  # only unused runners wait
    finally:
        warm.close()


def test_two_gradings_that_differ_only_in_their_reason_are_the_same_grade():
    from proofgym.eval.validate import verdict_difference

    a = Verdict(0.0, {"resolved": 0.0}, reason="assert <Obj at 0x7f01> == 3")
    b = Verdict(0.0, {"resolved": 0.0}, reason="assert <Obj at 0x7f99> == 3")
    assert verdict_difference(a, b) is None
    assert verdict_difference(a, Verdict(1.0, {"resolved": 1.0}, reason=a.reason)) is not None


_CHECK = b"from app import add\n\n\ndef check(candidate):\n    assert candidate(2, 3) == 5\n\n\ncheck(add)\n"
_CHEATS = {
    "os_exit_at_import": b"import os\nos._exit(0)\n",
    "sys_exit_at_import": b"import sys\nsys.exit(0)\n",
    "killed": b"import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
    "swallowed_assertion": (b"import atexit, os, sys\natexit.register(lambda: os._exit(0))\n"
                            b"sys.excepthook = lambda *a: None\n\ndef add(a, b):\n    return a - b\n"),
}


@pytest.mark.parametrize("cheat", sorted(_CHEATS))
def test_run_program_with_proof_never_finishes_a_program_that_ended_early(snap: Path, cheat: str):
    require_tool("bwrap")
    plain = run_program(snap, {"app.py": _CHEATS[cheat]}, argv=["python3", "check.py"],
                        hidden={"check.py": _CHECK}, timeout_s=30)
    proved = run_program(snap, {"app.py": _CHEATS[cheat]}, argv=["python3", "check.py"],
                         hidden={"check.py": _CHECK}, timeout_s=30, proof=True)
    assert plain.finished is None and proved.finished is False and not proved.ok, proved
    if cheat != "killed":  # the exit status alone says "passed" for these
        assert plain.exit_code == 0 and plain.ok and proved.exit_code == 0, (plain, proved)


def test_run_program_with_proof_finishes_the_fixed_code_and_keeps_argv_stdin_and_output(snap: Path):
    require_tool("bwrap")
    fixed = {"app.py": b"def add(a, b):\n    return a + b\n"}
    script = (b"import sys\nfrom app import add\n"
              b"print(sys.argv[1:], add(*map(int, sys.stdin.read().split())))\n")
    run = run_program(snap, fixed, argv=["python3", "sum.py", "x", "y"], stdin=b"2 3",
                      hidden={"sum.py": script}, timeout_s=30, proof=True, plain_values=True)
    assert run.finished is True and run.ok and run.stdout_text == "['x', 'y'] 5\n", run
    inline = run_program(snap, fixed, argv=["python3", "-c", "from app import add\nassert add(1, 1) == 2\n"
                                            "print(__name__)"], timeout_s=30, proof=True)
    assert inline.finished and inline.stdout_text == "__main__\n", inline
    failing = run_program(snap, {}, argv=["python3", "check.py"], hidden={"check.py": _CHECK},
                          timeout_s=30, proof=True)
    assert failing.exit_code == 1 and failing.finished is False and b"AssertionError" in failing.stderr


def test_plain_values_reject_objects_with_their_own_comparisons_and_keep_builtin_ones(snap: Path):
    require_tool("bwrap")
    anything = (b"class Anything(int):\n    def __eq__(self, other):\n        return True\n\n"
                b"def add(a, b):\n    return [Anything(0)]\n")
    check = b"from app import add\nassert add(2, 3) == [5]\n"
    cheat = run_program(snap, {"app.py": anything}, argv=["python3", "check.py"],
                        hidden={"check.py": check}, timeout_s=30, proof=True, plain_values=True)
    assert not cheat.finished and b"not a plain value: Anything defines __eq__" in cheat.stderr, cheat
    unguarded = run_program(snap, {"app.py": anything}, argv=["python3", "check.py"],
                            hidden={"check.py": check}, timeout_s=30, proof=True)
    assert unguarded.finished  # the always-equal element "equals" 5: what the guard is for
    named = (b"import collections\nP = collections.namedtuple('P', 'x y')\n\n"
             b"def add(a, b):\n    return [P(a + b, {'k': (1.5, None)})]\n")
    check = b"from app import add, P\nassert add(2, 3) == [(5, {'k': (1.5, None)})]\n"
    honest = run_program(snap, {"app.py": named}, argv=["python3", "check.py"],
                         hidden={"check.py": check}, timeout_s=30, proof=True, plain_values=True)
    assert honest.finished, honest


def test_run_program_proof_refuses_what_it_cannot_prove(snap: Path):
    with pytest.raises(ValueError, match="proof=True runs a Python program"):
        run_program(snap, {}, argv=["bash", "-c", "true"], proof=True)
    with pytest.raises(ValueError, match="proof=True runs a Python program"):
        run_program(snap, {}, argv=["python3", "-m", "pytest"], proof=True)
    with pytest.raises(ValueError, match="plain_values=True guards a check program"):
        run_program(snap, {}, argv=["python3", "check.py"], plain_values=True)
