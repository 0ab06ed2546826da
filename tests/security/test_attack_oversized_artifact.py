"""Attack: make the artifact (and the eval process that reads it) huge.

One episode can write hundreds of MB, tens of thousands of files, or sparse files whose apparent
size is gigabytes at no cost to the sandbox. ``snapshot()`` and the run record must stay bounded:
the artifact is marked as over a limit (it is then scored 0) instead of carrying the data, and
the eval process's resident memory grows by little, whatever the episode wrote.

Each episode runs in a child process (this checkout, default limits) whose peak RSS is read from
``/proc/self/status`` (``VmHWM``, reset through ``clear_refs`` just before the snapshot). The
child's address space is capped, so an unbounded snapshot fails the test instead of the host.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys

import pytest

from tests.conftest import REPO, require_tool

pytestmark = pytest.mark.sandbox

_MB = 1 << 20
#: The eval process may grow by this much while snapshotting and recording one episode.
_RSS_GROWTH_LIMIT = 256 * _MB
_AS_CAP = 3 << 30  # safety net for the host: an unbounded snapshot hits this, not the machine

_CHILD = r"""
import json, sys
import orjson
from proofgym.runtimes.sandbox import SandboxRuntime

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)

out = {}
try:
    with SandboxRuntime(prestart=False) as rt:
        r = rt.execute("bash", {"command": sys.argv[1]})
        out["command"] = str(r)[:500]
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset VmHWM to the current RSS
        out["rss_before"] = status("VmRSS")
        art = rt.snapshot()
        record = orjson.dumps(art.to_dict())
        out["peak"] = status("VmHWM")
        out["files"] = len(art.files)
        out["bytes"] = sum(len(c) for c in art.files.values() if c is not None)
        out["record_bytes"] = len(record)
        out["meta"] = {k: repr(v)[:200] for k, v in art.meta.items()}
except BaseException as exc:
    out["error"] = repr(exc)[:500]
print("RESULT " + json.dumps(out))
"""

_ATTACKS = {
    # 40 sparse files of 50 MiB each: 2,000 MiB apparent, nothing on disk
    "sparse-2GB": "python -c \"\nfor i in range(40): open(f'sparse{i}', 'wb').truncate(50 << 20)\"",
    # 360 MiB of real data (the workspace is a tmpfs as root, so the disk is never touched)
    "dense-360MB": "python -c \"\nfor i in range(6): open(f'dense{i}', 'wb').write(b'z' * (60 << 20))\"",
    # 30,000 new files, each a changed file to the snapshot. Empty: as an ordinary user the
    # scratch space is on the host's disk, and where it is mounted with `discard` (this CI
    # machine) removing 30,000 one-block files took 80 s of synchronous TRIMs after the test
    "many-files": "python -c \"\nimport os\nos.mkdir('m')\nfor i in range(30000): "
                  "open(f'm/{i}', 'w').close()\"",
}


def _run_episode(command: str) -> dict:
    require_tool("bwrap")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, command], env=env, capture_output=True, text=True,
        timeout=600, preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (_AS_CAP, _AS_CAP)))
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line is not None, f"the episode's process died (exit {proc.returncode}): {proc.stderr[-2000:]}"
    return json.loads(line[len("RESULT "):])


@pytest.mark.parametrize("attack", list(_ATTACKS))
def test_artifact_and_eval_memory_stay_bounded(attack):
    out = _run_episode(_ATTACKS[attack])
    assert "error" not in out, f"{attack}: snapshot or record failed: {out}"
    growth = out["peak"] - out["rss_before"]
    assert growth < _RSS_GROWTH_LIMIT, (
        f"{attack}: the eval process grew by {growth / _MB:.0f} MiB while snapshotting ({out})")
    assert out["record_bytes"] < _RSS_GROWTH_LIMIT, out
    marked = any("limit" in key for key in out["meta"])
    assert marked, f"{attack}: the artifact is not marked as over a limit: {out}"
