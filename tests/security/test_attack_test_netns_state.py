"""Attack: test processes of one grading talk through their shared network and pid namespaces.

The grading runner puts back the writable areas, removes IPC objects and resets every
per-process setting between tests, so "a test process leaves nothing for the next one". The
network namespace is the sandbox's, shared by every test process, and it keeps what a dead
process did: its counters (``/proc/net/snmp``: one more datagram received per datagram sent on
loopback) and its TCP state (a connection closed by the listening side stays in ``TIME_WAIT``
for a minute, and the port cannot be bound meanwhile: a bit per port). The pid namespace is the
sandbox's too, and pids are handed out in order: a test process's own pid says how many
processes the earlier ones started (3, then 304, then 605 after 300 forks each). The code under
test can so tell a later test process what an earlier one saw, e.g. the source of its generated
test file, which is how a real test is told from its mutant. Each test below reads the state first,
then leaves some behind; each must read nothing, whichever order the runner draws.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from proofgym.verify.sandboxed.program import run_pytest
from tests.conftest import require_tool

pytestmark = [pytest.mark.sandbox, pytest.mark.xfail(strict=True, reason=(
    "known gap, docs/threat-model.md ('Grading', Not defended): the test processes of one grading "
    "share the sandbox's pid and network namespaces (new ones need a capability the runner does "
    "not keep), so the pid counter, sockets in TIME_WAIT and the UDP counters carry a few bits "
    "from one test to the next; mutants fixed per task make what they carry no better than a coin"))]

CHANNELS = {
    # how many UDP datagrams this namespace has received so far; then one more
    "udp_counter": '''
import socket


def seen():
    with open("/proc/net/snmp") as f:
        head, values = [line.split() for line in f if line.startswith("Udp:")][:2]
    count = int(values[head.index("InDatagrams")])
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.sendto(b"x", s.getsockname())
    s.recv(1)
    return count
''',
    # whether port 40000 can be bound; then a TIME_WAIT left on it
    "time_wait_port": '''
import socket


def seen():
    busy = 0
    try:
        probe = socket.socket()
        probe.bind(("127.0.0.1", 40000))
        probe.close()
    except OSError:
        busy = 1
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 40000))
    srv.listen(1)
    cli = socket.create_connection(("127.0.0.1", 40000))
    conn, _ = srv.accept()
    conn.close()  # the listening side closes first: its end waits in TIME_WAIT
    cli.recv(1)
    cli.close()
    srv.close()
    return busy
''',
    # whether this process's pid is past what the runner alone would have used; then 300 forks
    "pid_counter": '''
import os


def seen():
    late = int(os.getpid() > 150)
    for _ in range(300):
        child = os.fork()
        if child == 0:
            os._exit(0)
        os.waitpid(child, 0)
    return late
''',
}

_TESTS = "import m\n\n" + "".join(f"\ndef test_{n}():\n    assert m.seen() == 0\n\n" for n in "abc")
IDS = [f"tests/test_m.py::test_{n}" for n in "abc"]


@pytest.mark.parametrize("channel", sorted(CHANNELS))
def test_a_test_process_reads_nothing_an_earlier_one_left_in_its_namespaces(tmp_path: Path, channel: str):
    require_tool("bwrap")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_m.py").write_text(_TESTS)
    (tmp_path / "m.py").write_text("def seen():\n    return 0\n")
    run = run_pytest(tmp_path, {"m.py": CHANNELS[channel].encode()}, tests=["tests/test_m.py"],
                     timeout_s=60, mutants=False)
    assert run.results == dict.fromkeys(IDS, "passed"), (
        f"a test process read what an earlier one left ({channel}): {run.results} "
        f"{ {k: v[-120:] for k, v in run.messages.items()} }")
