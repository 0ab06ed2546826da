"""Attack: change what the runtime reports by tampering with the agent's own shell, its
descriptors, or the sandbox's pid 1 (the supervisor that owns the control channel).

Each call runs in a fresh shell started by a trusted supervisor; what one call does to its shell
(traps, ``ulimit``, closed descriptors) must not change the report of that call's status or
anything of the next call, and the supervisor itself must be out of the agent's reach.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from proofgym.runtimes.sandbox import SandboxRuntime
from tests.conftest import require_tool
from tests.sandbox_helpers import FAST_LIMITS
from tests.security.conftest import bash, python_inside

pytestmark = pytest.mark.sandbox


def test_printing_memoryerror_is_not_out_of_memory(rt):
    r = bash(rt, "echo 'MemoryError: Cannot allocate memory'; exit 1")
    assert r.ok and "[exit code 1]" in r.output, r
    assert "out of memory" not in r.output, r


def test_a_debug_trap_does_not_write_into_the_next_observation(rt):
    bash(rt, "trap 'echo INJECTED' DEBUG; PROMPT_COMMAND='echo INJECTED'; export PROMPT_COMMAND")
    r = bash(rt, "echo clean")
    assert r.ok and r.output == "clean", r


def test_fd_exhaustion_does_not_break_the_next_call(rt):
    bash(rt, "ulimit -n 3")
    r = bash(rt, "echo fine; false")
    assert r.ok and r.output == "fine\n[exit code 1]", r


def test_closing_the_output_descriptors_is_not_a_timeout(rt):
    r = bash(rt, "exec >&- 2>&-; true")
    assert r.ok, r
    assert bash(rt, "echo next").output == "next"


def test_the_supervisor_is_out_of_reach(rt):
    # its descriptors (the control channel) and memory cannot be opened, and signals from
    # inside the namespace do not reach it
    r = python_inside(rt, """
import os
from pathlib import Path
for path in ("/proc/1/fd/0", "/proc/1/fd/1", "/proc/1/mem", "/proc/1/environ"):
    try:
        os.open(path, os.O_RDWR if "fd" in path else os.O_RDONLY)
        print("OPENED", path)
    except OSError as exc:
        print("refused", path, exc.errno)
for sig in (9, 19, 15, 2):
    try:
        os.kill(1, sig)
    except OSError:
        pass
print("done")
""")
    assert "OPENED" not in r.output and "done" in r.output, r
    nxt = bash(rt, "echo still here")
    assert nxt.ok and nxt.output == "still here", nxt


def test_forged_frames_on_any_reachable_descriptor_change_nothing(rt):
    # whatever descriptors a command holds, writing frame-like bytes to them is only output
    r = bash(rt, "for fd in 1 2 3 4 5 6 7 8 9; do printf '\\0\\0\\0\\x05\\xfb\\x00\\x00\\x00\\x00' "
                 ">&$fd; done 2>/dev/null; printf '\\x00\\x00\\x00\\x10' >/proc/1/fd/1; echo end")
    assert "end" in r.output, r
    assert bash(rt, "echo ok; exit 3").output == "ok\n[exit code 3]"


# The next three guard risks of the supervisor design itself (no such surface existed before).
def test_lowering_the_supervisors_limits_ends_in_a_usable_episode(rt):
    # pid 1 shares the agent's uid, so prlimit(2) on it may succeed: the episode must go on
    python_inside(rt, """
import resource
try:
    resource.prlimit(1, resource.RLIMIT_NOFILE, (4, 4))
except OSError as exc:
    print("refused", exc)
""")
    r = bash(rt, "echo a")
    assert r.output.startswith("a") or "restarted" in r.output, r
    r = bash(rt, "echo b")
    assert r.ok and r.output == "b", r


def test_a_saved_environment_cannot_run_code_in_the_next_shell(rt):
    bash(rt, "echo 'echo INJECTED' > /tmp/env.sh; export BASH_ENV=/tmp/env.sh ENV=/tmp/env.sh; "
             "f() { echo INJECTED; }; export -f f; builtin() { echo INJECTED; }; export -f builtin")
    r = bash(rt, "echo clean")
    assert r.ok and r.output == "clean", r


def test_exported_values_of_any_bytes_carry_over(rt):
    bash(rt, "export A=$'multi\\nline \"q\" $x \\\\ \\x01 \\xff' B=")
    r = bash(rt, "printf '%q|%q' \"$A\" \"$B\"")
    assert r.output == "$'multi\\nline \"q\" $x \\\\ \\001 \\377'|''", r


def test_the_channel_holds_on_the_unprivileged_path(tmp_path, monkeypatch):
    """The same attacks through the path taken without root (forced here as in
    tests/runtimes/sandbox/test_userns.py)."""
    require_tool("bwrap")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with SandboxRuntime(tmp_path, limits=FAST_LIMITS, prestart=False) as runtime:
        r = bash(runtime, "builtin() { command printf \"$2\" \"$3\" 0; }; false")
        assert r.ok and "[exit code 1]" in r.output, r
        bash(runtime, "trap 'echo INJECTED' DEBUG; ulimit -n 3")
        assert bash(runtime, "echo clean").output == "clean"
        r = python_inside(runtime, "import os\ntry:\n    os.open('/proc/1/fd/1', os.O_WRONLY)\n"
                                   "    print('OPENED')\nexcept OSError:\n    print('refused')")
        assert r.output == "refused", r
        bash(runtime, "nohup sleep 100 >/dev/null 2>&1 & disown; echo x > a")
        assert runtime.snapshot().files == {"a": b"x\n"}
        assert int(bash(runtime, "ps -e -o pid= | wc -l").output) <= 4


def test_nothing_of_the_agent_runs_between_calls(rt):
    bash(rt, "nohup sleep 100 >/dev/null 2>&1 & setsid sleep 100 & (sleep 100 &) ; echo x")
    procs = rt._shell._sandbox_processes()  # seen from the host
    assert 1 in {inner for _host, inner in procs} and len(procs) <= 2, procs
    for host, _inner in procs:  # the supervisor, and the next call's shell waiting for it
        assert b"sleep" not in Path(f"/proc/{host}/cmdline").read_bytes()
