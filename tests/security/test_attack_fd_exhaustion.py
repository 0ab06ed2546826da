"""Attack: take away the file descriptors the runtime talks through.

A command that lowers the shell's fd limit, or closes or redirects the shell's own output, must
not make the runtime misreport it (a command that ran for a millisecond is not a timeout) nor
break the episode silently: the next call works, or says clearly that the shell was restarted.
"""

from __future__ import annotations

import pytest

from tests.security.conftest import bash

pytestmark = pytest.mark.sandbox


def _next_call_works(rt) -> None:
    """The next call runs and shows its output, or fails saying the shell was restarted (then the
    one after it runs)."""
    r = bash(rt, "echo alive; echo to-stderr >&2")
    if r.error_kind is not None and "restarted" in r.output:
        r = bash(rt, "echo alive; echo to-stderr >&2")
    assert r.ok and "alive" in r.output and "to-stderr" in r.output, (
        f"the call after the attack lost its output or status: {r}")


def test_ulimit_n_3_does_not_break_the_next_calls(rt):
    r = bash(rt, "ulimit -n 3; false")
    assert r.error_kind is not None or "[exit code 1]" in r.output, r
    _next_call_works(rt)
    again = bash(rt, "true")
    assert again.ok and "[exit code" not in again.output, f"`true` was reported as {again}"


@pytest.mark.parametrize("attack", ["exec 1>&-", "exec 1>/dev/null", "exec 1>&- 2>&-",
                                    "exec 1>/workspace/sink"])
def test_closing_or_redirecting_the_shells_output_is_reported_truthfully(rt, attack):
    r = bash(rt, f"{attack}; false")
    # it ran for a moment: a "timeout" is a false report
    assert r.error_kind != "timeout", f"{attack!r} was reported as {r}"
    assert r.error_kind is not None or "[exit code 1]" in r.output, r
    _next_call_works(rt)


def test_closing_the_shells_saved_descriptors_is_survivable(rt):
    # bash keeps copies of the redirected fds at 10 and above while a command runs
    r = bash(rt, "for fd in 10 11 12 13 14 15 16 17 18 19 255; do eval \"exec $fd>&-\"; done; false")
    assert r.error_kind != "timeout", r
    _next_call_works(rt)
