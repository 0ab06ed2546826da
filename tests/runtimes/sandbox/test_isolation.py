"""Isolation: what the agent's sandbox cannot see, reach or write."""

from __future__ import annotations

import socket
import socketserver
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from proofgym.envs.code_repair import DATA, code_repair_tasks
from proofgym.runtimes.sandbox import SandboxRuntime
from tests.conftest import require_tool
from tests.sandbox_helpers import FAST_LIMITS, bash

pytestmark = pytest.mark.sandbox

# Every directory of the sandbox's file system except the kernel's views of itself (/proc, /sys:
# process and device state, not files; /proc also holds this very command line).
_GREP_ALL = ('for d in /* /.[!.]*; do case "$d" in /proc|/sys|"/.[!.]*") ;; '
             '*) grep -rlsF -e "$PATTERN" "$d";; esac; done; true')


def _canary(task_id: str) -> str:
    return f"PROOFGYM-CANARY {task_id} 7f3c9b2e"


def _grep_everything(rt: SandboxRuntime, text: str) -> str:
    # the pattern reaches grep through a variable built from pieces, so no file and no argument
    # the agent could read holds it whole except the places we search for it
    head, tail = text[:8], text[8:]
    r = rt.execute("bash", {"command": f"PATTERN='{head}''{tail}'; {_GREP_ALL}"})
    assert r.ok, r.output
    return r.output


@pytest.mark.slow
def test_hidden_test_canaries_are_invisible_to_the_agent():
    require_tool("bwrap")
    tasks = list(code_repair_tasks())
    assert len(tasks) >= 2
    for task in tasks:  # the canary is where it should be, so the search below means something
        assert any(_canary(task.id).encode() in data for data in task.hidden_files.values())

    def search(task):
        with SandboxRuntime(limits=FAST_LIMITS.__class__(command_timeout_s=120)) as rt:
            task.setup_runtime(rt)
            mounts = rt.execute("bash", {"command": "cat /proc/self/mountinfo"}).output
            assert "code_repair" not in mounts and str(task.root) not in mounts
            # with its positive control: the canary planted in the workspace first, one search
            # of the whole file system must find it there and nowhere else (a search before the
            # planting and one after walked every file twice, a CI cost, for the same claim)
            rt.execute("write_file", {"path": "planted.txt", "content": _canary(task.id)})
            return task.id, _grep_everything(rt, _canary(task.id))

    with ThreadPoolExecutor(2) as pool:
        for task_id, found in pool.map(search, tasks):
            assert found.split() == ["/workspace/planted.txt"], f"{task_id}: canary visible at {found}"


def test_host_files_are_not_visible(sandbox):
    r = bash(sandbox, "ls -d /root /home /work /mnt /srv 2>&1; echo; ls /")
    for path in ("/root", "/home", "/work", "/mnt", "/srv"):
        assert f"cannot access '{path}'" in r.output
    assert set(r.output.split("\n\n", 1)[1].split()) <= {
        "bin", "dev", "etc", "lib", "lib64", "opt", "proc", "sbin", "sys", "tmp", "usr", "workspace",
        "[exit", "code", "2]"}
    r = bash(sandbox, "python -c 'import proofgym'")
    assert "No module named 'proofgym'" in r.output
    site = bash(sandbox, "ls /opt/python/lib/python3*/site-packages").output.split()
    assert set(site) <= {"pytest", "_pytest", "py.py", "pluggy", "iniconfig", "packaging", "pygments"}
    assert str(Path(DATA)) not in bash(sandbox, "cat /proc/self/mountinfo").output


class _Echo(socketserver.BaseRequestHandler):
    def handle(self):
        self.request.sendall(b"reached the host")


def test_no_network_not_even_loopback(sandbox):
    server = socketserver.TCPServer(("127.0.0.1", 0), _Echo)
    port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:  # the server works
            assert s.recv(100) == b"reached the host"
        probe = ("import socket, sys\n"
                 f"for host, port in [('127.0.0.1', {port}), ('1.1.1.1', 53), ('8.8.8.8', 443), "
                 f"('10.0.0.1', 80), ('::1', {port})]:\n"
                 "    try:\n"
                 "        s = socket.create_connection((host, port), timeout=2)\n"
                 "        print('CONNECTED', host, s.recv(100))\n"
                 "    except OSError as e:\n"
                 "        print('refused', host, type(e).__name__)\n")
        sandbox.execute("write_file", {"path": "probe.py", "content": probe})
        r = bash(sandbox, "python probe.py; python -c 'import socket; print(socket.if_nameindex())';"
                          " python -c \"import socket; socket.getaddrinfo('pypi.org', 443)\"")
        assert "CONNECTED" not in r.output
        assert r.output.count("refused") == 5
        assert "[(1, 'lo')]" in r.output  # no interface but an isolated loopback
        assert "gaierror" in r.output
    finally:
        server.shutdown()
        server.server_close()


def test_writes_outside_the_workspace_fail(sandbox):
    targets = ["/x", "/usr/bin/x", "/usr/lib/x", "/etc/x", "/opt/python/lib/python3.11/os.py",
               "/opt/python/lib/python3.11/site-packages/x.pth", "/bin/x", "/dev/x", "/dev/shm/x",
               "/workspace/../x", "/proc/x"]
    script = "; ".join(f"(echo x > {t}) 2>/dev/null && echo WROTE {t}" for t in targets)
    r = bash(sandbox, script + "; echo ok > /workspace/in.txt && echo ok > /tmp/scratch && echo done")
    assert "WROTE" not in r.output, r.output
    assert r.output.strip().endswith("done")
    assert bash(sandbox, "python -c \"import os; os.chmod('/usr/bin/bash', 0o777)\"").output.count(
        "Read-only file system") == 1
    assert dict(sandbox.snapshot().files) == {"in.txt": b"ok\n"}


def test_the_device_nodes_work_and_ptys_come_from_a_devpts_of_the_sandboxs_own(sandbox):
    r = bash(sandbox, "echo x > /dev/null && head -c 3 /dev/zero | wc -c && head -c 5 /dev/urandom "
             "| wc -c && ls /dev/fd/ >/dev/null && echo fd-ok && python -c \"import os; m, s = "
             "os.openpty(); os.write(m, b'hi\\n'); print(os.ttyname(s), os.read(s, 9))\" && "
             "ls /dev/pts")
    lines = r.output.split()
    assert lines[:3] == ["3", "5", "fd-ok"], r.output
    # the pty the sandbox opened is the first of a devpts instance nobody else uses
    assert lines[3:5] == ["/dev/pts/0", "b'hi\\n'"], r.output
    assert lines[5:] == ["ptmx"], r.output  # and it is gone with the process that held it


def test_the_snapshot_on_the_host_is_never_written(tmp_path):
    require_tool("bwrap")
    snap = tmp_path / "snap"
    snap.mkdir()
    (snap / "keep.py").write_text("original\n")
    with SandboxRuntime(snap, limits=FAST_LIMITS) as rt:
        bash(rt, "echo changed > keep.py; rm -f keep.py; echo new > new.py; chmod 000 .")
        assert rt.snapshot().files == {"keep.py": None, "new.py": b"new\n"}
    assert sorted(p.name for p in snap.iterdir()) == ["keep.py"]
    assert (snap / "keep.py").read_text() == "original\n"


def test_processes_run_unprivileged_in_their_own_namespaces(sandbox):
    r = bash(sandbox, "id -u; hostname; ps -e -o pid= | wc -l; grep Cap[EP] /proc/self/status")
    lines = r.output.splitlines()
    assert lines[0] == "1000" and lines[1] == "sandbox"
    assert int(lines[2]) <= 5  # init, the shell, this pipeline: nothing of the host
    assert all(line.split()[1] == "0000000000000000" for line in lines[3:])
