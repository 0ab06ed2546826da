"""Attack: a directory tree deeper than the host's walkers can follow.

Inside the sandbox, ``mkdir a && cd a`` in a loop builds a tree thousands of levels deep (each
system call sees a short relative path). A recursive walk on the host hits Python's recursion
limit, and absolute host paths pass ``PATH_MAX``: ``snapshot()`` must neither raise nor hang nor
silently drop the files (the artifact holds them or is marked over its path limit), and such a
tree left behind by a killed run must not stop later runs from starting (a start-up sweep that
recurses into it would raise in every later ``SandboxRuntime``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from proofgym.runtimes.sandbox import SandboxLimits, SandboxRuntime
from tests.conftest import REPO, require_tool
from tests.security.conftest import bash, python_inside

pytestmark = pytest.mark.sandbox


def _build(depth: int) -> str:
    return f"""
import os
for _ in range({depth}):
    os.mkdir('a')
    os.chdir('a')
open('bottom.txt', 'w').write('deep')
print('BUILT', len(os.getcwd()))
"""


@pytest.fixture
def rt():
    """Building thousands of nested directories on a disk-backed overlay (as an ordinary user)
    takes seconds: a time limit that never cuts the build short."""
    require_tool("bwrap")
    runtime = SandboxRuntime(limits=SandboxLimits(command_timeout_s=120.0))
    try:
        yield runtime
    finally:
        runtime.close()


@pytest.mark.parametrize("depth", [1200, 3000])
def test_snapshot_of_a_very_deep_tree(rt, depth):
    try:
        r = python_inside(rt, _build(depth))
        assert "BUILT" in r.output, r.output
        assert rt.execute("write_file", {"path": "top.txt", "content": "top"}).ok
        art = rt.snapshot()  # must not raise (RecursionError, ENAMETOOLONG)
        deep = [p for p in art.files if str(p).endswith("bottom.txt")]
        marked = any("limit" in str(k) for k in art.meta)
        assert deep or marked, (f"the deep file is silently missing from the artifact "
                                f"({len(art.files)} files, meta {dict(art.meta)})")
        if not marked:
            assert art.files.get("top.txt") == b"top", art.files.keys()
    finally:  # this test's own mess is never left on the host, whatever the runtime does
        bash(rt, "cd /workspace && rm -rf a")
        upper = rt.workspace_changes_dir / "a"
        if upper.exists():
            subprocess.run(["rm", "-rf", "--one-file-system", str(upper)], check=False)


_KILLED_RUN = r"""
import sys
from proofgym.runtimes.sandbox import SandboxRuntime
rt = SandboxRuntime()
r = rt.execute("bash", {"command": "python -c \"" + sys.argv[1] + "\""})
assert "BUILT" in r.output, r
print("READY", flush=True)
rt.execute("bash", {"command": "sleep 60"})
"""

_LATER_RUN = r"""
from proofgym.runtimes.sandbox import SandboxRuntime
with SandboxRuntime() as rt:
    assert "ok" in rt.execute("bash", {"command": "echo ok"}).output
print("STARTED", flush=True)
"""


def test_a_deep_tree_left_by_a_killed_run_does_not_stop_later_runs():
    require_tool("bwrap")
    tmpdir = Path(tempfile.mkdtemp(prefix="proofgym-attack-deep-"))
    tmpdir.chmod(0o755)  # reachable by an unprivileged sandbox uid
    env = {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(tmpdir)}
    build = "import os\nfor _ in range(3000): os.mkdir('a'); os.chdir('a')\nprint('BUILT')"
    child = subprocess.Popen([sys.executable, "-c", _KILLED_RUN, build], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line.strip() == "READY", f"{line!r} {child.stderr.read()[-2000:]}"
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        time.sleep(0.5)
        later = subprocess.run([sys.executable, "-c", _LATER_RUN], env=env, capture_output=True,
                               text=True, timeout=300)
        assert "STARTED" in later.stdout, f"a later run failed to start: {later.stderr[-1500:]}"
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            point = line.split()[4]
            if point.startswith(f"{tmpdir}/"):
                subprocess.run(["umount", "-l", point], check=False, capture_output=True)
        subprocess.run(["chmod", "-R", "u+rwx", str(tmpdir)], check=False, capture_output=True)
        subprocess.run(["rm", "-rf", "--one-file-system", str(tmpdir)], check=False)
