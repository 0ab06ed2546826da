"""Acceptance 2: from inside a RepoRepair episode's sandbox, neither the pristine source nor the
hidden tests can be recovered.

The agent's own sandbox runs a search of every readable file of the whole file system (the image:
``/usr``, ``/opt/python`` and its ``site-packages``; ``/workspace``; ``/tmp``, ``/home``, any
cache; ``/sys``) and of ``/proc`` (every process's command line, environment, status, mount
table and open-file targets) for two canaries: a line of a hidden failing test, and the original
code around the bug (the old side of the bug's patch: the replaced lines with their context, a
block no other file holds). The canaries are passed hex-encoded, so the search itself
never puts them on a command line or in a file. The same search over a sandbox whose workspace is
the task's whole cache directory (``repo/`` with ``hidden/`` and ``solution/``: the cache left
mounted) must find both: the search is able to see a leak.
"""

from __future__ import annotations

import json
import re

import pytest

from proofgym.runtimes.sandbox import SandboxRuntime
from tests.conftest import require_tool
from tests.envs.repo_repair_helpers import offline_records, seed_cache, task_of

pytestmark = pytest.mark.sandbox

_SEARCH = r'''
import json, os, stat, sys
needles = [bytes.fromhex(h) for h in sys.argv[1:]]
hits, files, nbytes, roots = [], 0, 0, set()

def scan(path, data):
    global files, nbytes
    files += 1
    nbytes += len(data)
    for i, needle in enumerate(needles):
        if needle in data:
            hits.append([i, path])

def read(path, limit=64 << 20):
    try:
        with open(path, "rb") as f:
            return f.read(limit)
    except OSError:
        return None

for top in sorted(os.listdir("/")):
    if top == "proc":
        continue
    for dirpath, dirnames, filenames in os.walk("/" + top, followlinks=False):
        roots.add("/" + top)
        for name in filenames:
            path = os.path.join(dirpath, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                data = read(path)
                if data is not None:
                    scan(path, data)
            elif stat.S_ISLNK(st.st_mode):
                scan(path, os.readlink(path).encode())
for pid in [p for p in os.listdir("/proc") if p.isdigit()] + ["self"]:
    for leaf in ("cmdline", "environ", "status", "mountinfo", "maps", "stat"):
        data = read(f"/proc/{pid}/{leaf}")
        if data is not None:
            scan(f"/proc/{pid}/{leaf}", data)
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        fds = []
    for fd in fds:
        try:
            scan(f"/proc/{pid}/fd/{fd}", os.readlink(f"/proc/{pid}/fd/{fd}").encode())
        except OSError:
            pass
for name in ("cmdline", "mounts", "version"):
    data = read(f"/proc/{name}")
    if data is not None:
        scan(f"/proc/{name}", data)
print("SEARCH " + json.dumps({"hits": hits, "files": files, "bytes": nbytes, "roots": sorted(roots)}))
'''


def _canaries(task) -> tuple[bytes, bytes]:
    """A line of a hidden failing test, and the original code around the bug (a hunk's old side:
    its context lines with the line the bug replaced), each found nowhere in the agent's
    workspace (so a hit can only be a leak)."""
    repo_text = b"\n".join(p.read_bytes() for p in task.inner.repo.rglob("*") if p.is_file())
    node = task.record.fail_to_pass[0]
    path, name = node.split("::", 1)[0], node.rsplit("::", 1)[1]
    hidden = (task.root / "hidden" / path).read_text().splitlines()
    start = next(i for i, line in enumerate(hidden) if re.match(rf"\s*def {name}\(", line))
    body = [ln.strip() for ln in hidden[start + 1:] if ln.strip()]
    test_line = next((ln for ln in body if len(ln) >= 12 and ln.encode() not in repo_text), None)
    hunk = task.record.patch.split("\n@@", 1)[1].split("\n", 1)[1]
    old_side = "".join(ln[1:] + "\n" for ln in hunk.splitlines()
                       if ln[:1] in (" ", "-") and not ln.startswith("---")).strip("\n")
    if test_line is None or old_side.encode() in repo_text:
        return b"", b""
    return test_line.encode(), old_side.encode()


def _search(lower, canaries, image) -> dict:
    runtime = SandboxRuntime(lower, image=image)
    try:
        # the search runs from a heredoc: it is in no file of the sandbox (and holds no canary)
        out = runtime.execute("bash", {"command": "python3 - " + " ".join(c.hex() for c in canaries)
                                       + f" <<'PG_EOF'\n{_SEARCH}\nPG_EOF"})
    finally:
        runtime.close()
    line = next(ln for ln in out.output.splitlines() if ln.startswith("SEARCH "))
    return json.loads(line[len("SEARCH "):])


@pytest.mark.slow
def test_the_agent_cannot_find_the_pristine_source_or_the_hidden_tests(tmp_path, monkeypatch):
    require_tool("bwrap")
    cache = tmp_path / "cache"
    monkeypatch.setenv("PROOFGYM_CACHE", str(cache))
    seed_cache(cache)
    chosen = None
    for record in offline_records():
        task = task_of(record, cache)
        canaries = _canaries(task)
        if all(canaries):
            chosen = task, canaries
            break
    assert chosen is not None, "no bundled offline task has canaries absent from its workspace"
    task, canaries = chosen
    # the task's source and hidden test really hold them (they are what grading restores)
    assert canaries[0] in b"".join(p.read_bytes() for p in (task.root / "hidden").rglob("*.py"))
    assert canaries[1] in b"".join(p.read_bytes() for p in (task.root / "solution").rglob("*.py"))

    agent = _search(task.inner.repo, canaries, task.image)
    assert agent["files"] > 1000 and agent["bytes"] > 10 << 20, agent  # it searched the image
    assert {"/workspace", "/usr", "/opt", "/tmp"} <= set(agent["roots"]), agent["roots"]
    assert agent["hits"] == [], f"leaked into the agent's sandbox: {agent['hits']}"

    # the cache left mounted (the task's whole directory as the workspace): both are found
    leaky = _search(task.root, canaries, task.image)
    found = {i for i, _ in leaky["hits"]}
    assert found == {0, 1}, leaky["hits"]
