"""Attack: the kernel's knobs under ``/proc`` (and device nodes under ``/dev``).

Outside ``/proc/sys`` (see the host-root suite), ``/proc`` has files that act on the whole host
when written: ``/proc/sysrq-trigger`` reboots, crashes or powers off the machine with one byte,
and it checks nothing but the file's owner (host uid 0). The probes here only *open* files for
writing and close them at once: nothing is ever written, so a hole found has no effect.
"""

from __future__ import annotations

import pytest

from tests.security.conftest import python_inside

pytestmark = pytest.mark.sandbox

_WRITABLE_PROBE = """
import os
found, checked = [], 0
def probe(path):
    global checked
    checked += 1
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError:
        return
    os.close(fd)  # never a write
    found.append(path)
skip = {"self", "thread-self"}
for root, dirs, files in os.walk("/proc"):
    if root == "/proc":
        dirs[:] = [d for d in dirs if not d.isdigit() and d not in skip]
    for f in files:
        probe(os.path.join(root, f))
print("CHECKED", checked)
print("WRITABLE", found)
"""


def test_sysrq_trigger_cannot_be_opened_for_writing(rt):
    r = python_inside(rt, """
import os
try:
    fd = os.open("/proc/sysrq-trigger", os.O_WRONLY)
    os.close(fd)  # never a write
    print("OPENED")
except OSError as exc:
    print("DENIED", exc.errno)
""")
    assert "DENIED" in r.output or "OPENED" in r.output, r.output
    assert "OPENED" not in r.output, "the agent can open /proc/sysrq-trigger for writing"


def test_no_file_under_proc_is_writable_outside_the_agents_own_processes(rt):
    r = python_inside(rt, _WRITABLE_PROBE)
    assert "CHECKED" in r.output, r.output
    checked = int(r.output.split("CHECKED", 1)[1].split()[0])
    assert checked > 20, r.output  # the walk saw /proc
    writable = eval_list(r.output.split("WRITABLE", 1)[1].strip())
    # pressure-stall triggers are per open file and meant for unprivileged users
    knobs = [p for p in writable if not p.startswith("/proc/pressure/")]
    assert knobs == [], f"kernel knobs writable from inside: {knobs}"


def eval_list(text: str) -> list[str]:
    import ast

    return list(ast.literal_eval(text))


def test_dev_holds_only_the_harmless_devices(rt):
    r = python_inside(rt, "import os\nprint('DEV', *sorted(os.listdir('/dev')))")
    names = set(r.output.split("DEV", 1)[1].split())
    allowed = {"null", "zero", "full", "random", "urandom", "tty", "pts", "ptmx", "shm", "fd",
               "stdin", "stdout", "stderr", "core", "console", "mqueue"}
    assert names and names <= allowed, f"unexpected device nodes: {sorted(names - allowed)}"
