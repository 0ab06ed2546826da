"""Attack: poison the state that carries over from one call to the next.

The working directory and exported variables persist between ``bash`` calls, so the next call's
shell starts from what the agent left. Variables that change how the shell itself reads its next
command (``TMOUT`` bounds bash's ``read``), or a state written by hand where the runtime collects
it, must not make the next command vanish or be misreported.
"""

from __future__ import annotations

import time

import pytest

from tests.security.conftest import bash

pytestmark = pytest.mark.sandbox

_POISON = {
    "TMOUT": "export TMOUT=1",
    "TMOUT-tiny": "export TMOUT=0.001",
    # a hand-written state on the descriptors a wrapper might save it to
    "forged-state": "trap - EXIT; for fd in 3 4 5 6 7 8 9; do "
                    "printf '/workspace\\0declare -x TMOUT=\"1\"\\n' >&$fd; done 2>/dev/null; true",
}


@pytest.mark.parametrize("poison", list(_POISON))
def test_the_next_command_runs_and_is_reported_truthfully(rt, poison):
    bash(rt, _POISON[poison])
    time.sleep(2)  # the agent thinks before its next call
    r = bash(rt, "echo ran; false")
    assert "ran" in r.output, f"the next command did not run, reported as {r}"
    assert "[exit code 1]" in r.output or r.error_kind is not None, r
    again = bash(rt, "echo again")
    assert again.ok and "again" in again.output, again
