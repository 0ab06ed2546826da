"""Attack: a test process that ends early with a zero exit status passes its test.

A forked test process used to report through its exit status only, so code under test that
stops the process with status 0 before the test's assertion fails (``os._exit(0)`` at import or
inside the test, ``os._exit`` replaced so that the runner's own exit says 0, ``sys.exit(0)``)
passed, and with no mutant for that test (``mutants=False`` here; a ``pytest.raises``-only or
helper-style test has none) nothing else caught it. A pass now needs the runner's per-test nonce,
sent only after the test's pytest run returned in the child (``_prove`` in
``proofgym/programs/pytest_runner.py``).

Every test below is wrong for the buggy ``add`` (it subtracts): no ending may pass it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from proofgym.verify.sandboxed.program import run_pytest
from tests.conftest import require_tool

pytestmark = pytest.mark.sandbox

_TESTS = b"""
from app import add


def test_add():
    assert add(2, 3) == 5


def test_add_again():
    assert add(4, 4) == 8
"""
_IDS = ["tests/test_hidden.py::test_add", "tests/test_hidden.py::test_add_again"]
_BUGGY = "def add(a, b):\n    return a - b\n"

#: How the code under test ends its process before the assertion can fail.
ENDINGS = {
    "os_exit_at_import": "import os\nos._exit(0)\n" + _BUGGY,
    "os_exit_in_the_test": "import os\n\ndef add(a, b):\n    os._exit(0)\n",
    "sys_exit_at_import": "import sys\nsys.exit(0)\n" + _BUGGY,
    "sys_exit_in_the_test": "import sys\n\ndef add(a, b):\n    sys.exit(0)\n",
    # the runner's own final os._exit(code) reports 0 whatever the test did
    "os_exit_replaced": ("import os\n_real = os._exit\nos._exit = lambda code: _real(0)\n"
                         + _BUGGY),
    # an exit hook that turns whatever the process ends with into status 0
    "atexit_os_exit": ("import atexit, os, sys\natexit.register(lambda: os._exit(0))\n"
                       "sys.excepthook = lambda *a: os._exit(0)\n" + _BUGGY),
    "killed_interpreter": "import os, signal\n\ndef add(a, b):\n    os.kill(os.getpid(), signal.SIGKILL)\n",
    "exit_from_a_thread": ("import os, threading, time\n\ndef add(a, b):\n"
                           "    threading.Thread(target=os._exit, args=(0,)).start()\n"
                           "    time.sleep(5)\n"),
}


@pytest.fixture
def snap(tmp_path: Path) -> Path:
    (tmp_path / "app.py").write_text(_BUGGY)
    (tmp_path / "tests").mkdir()
    return tmp_path


@pytest.mark.parametrize("ending", sorted(ENDINGS))
@pytest.mark.parametrize("mutants", [False, True], ids=["no-mutant", "with-mutant"])
def test_a_test_process_that_ends_early_never_passes(snap: Path, ending: str, mutants: bool):
    require_tool("bwrap")
    run = run_pytest(snap, {"app.py": ENDINGS[ending].encode()}, tests=_IDS,
                     hidden={"tests/test_hidden.py": _TESTS}, mutants=mutants, timeout_s=60,
                     test_timeout_s=20)
    assert run.failure is None, (run.failure, run.report_error)
    assert run.results and not any(s == "passed" for s in run.results.values()), run.results
    assert set(run.results.values()) <= {"crashed", "error", "failed"}, run.results


def test_the_honest_fix_still_passes_and_the_buggy_code_fails(snap: Path):
    """The controls: the proof handshake passes a real pass, and fails a real failure."""
    require_tool("bwrap")
    good = run_pytest(snap, {"app.py": b"def add(a, b):\n    return a + b\n"}, tests=_IDS,
                      hidden={"tests/test_hidden.py": _TESTS}, mutants=False, timeout_s=60)
    assert good.results == {i: "passed" for i in _IDS}, (good.results, good.messages)
    bad = run_pytest(snap, {}, tests=_IDS, hidden={"tests/test_hidden.py": _TESTS},
                     mutants=False, timeout_s=60)
    assert bad.results == {i: "failed" for i in _IDS}, bad.results
