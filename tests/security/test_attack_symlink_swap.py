"""Attack: swap workspace entries for symlinks to host paths while ``snapshot()`` walks them.

The overlay's upper directory is a host directory; symlinks the agent makes there point, for
whoever reads them on the host, at host paths. If the agent's processes still run while the
snapshot is taken, a directory checked as a directory (or a file checked as a regular file) can
become a symlink before it is read, and a host file lands in the artifact that is stored and
graded. Here the host holds a canary file and the eval process's own ``/proc/self/environ``;
neither may ever appear in an artifact, however the race falls (it is run many times).
"""

from __future__ import annotations

import secrets
import threading
import time
from pathlib import Path

import pytest

from tests.security.conftest import bash

pytestmark = pytest.mark.sandbox

_NAMES = [f"s{i:03}" for i in range(200)]
# ``d`` holds files named like those of the host directory the agent aims at (it knows the names
# of /etc or ~/.ssh just as well): reading them one by one is the window for the swap.
_FILLER = ("mkdir -p d && python -c \"import os\nfor n in " + repr(_NAMES) + ": "
           "open('d/' + n, 'w').write('mine' * 256)\" && echo mine > f")


def _swap_loop(host_dir: Path, seconds: float) -> str:
    return (f"end=$((SECONDS + {int(seconds)})); while [ $SECONDS -lt $end ]; do "
            f"mv d d.real; ln -s {host_dir} d; mv f f.real; ln -s /proc/self/environ f; "
            "rm d f; mv d.real d; mv f.real f; done")


@pytest.fixture
def host_secrets(tmp_path):
    canary = f"HOST-CANARY-{secrets.token_hex(8)}"
    d = tmp_path / "host-secrets"
    d.mkdir()
    for name in _NAMES:
        (d / name).write_text(canary)
    environ = Path("/proc/self/environ").read_bytes()
    return d, canary.encode(), environ


def _leaks(artifact, canary: bytes, environ: bytes) -> list[str]:
    found = []
    for path, content in artifact.files.items():
        if content is None:
            continue
        if canary in content or (len(environ) > 16 and environ[:64] in content):
            found.append(str(path))
    return found


def _snapshot_while(rt, busy, canary: bytes, environ: bytes) -> tuple[int, list, list]:
    """Snapshots taken while ``busy()``, host files found in them, and snapshots that raised."""
    taken, leaks, errors = 0, [], []
    while busy():
        try:
            art = rt.snapshot()
        except OSError as exc:  # a walk that trips over the swap must not abort the run either
            errors.append(repr(exc))
            continue
        taken += 1
        leaks += _leaks(art, canary, environ)
    return taken, leaks, errors


def test_swap_during_a_running_command_never_leaks_host_files(rt, host_secrets):
    host_dir, canary, environ = host_secrets
    assert bash(rt, _FILLER).ok
    for _ in range(3):
        runner = threading.Thread(target=bash, args=(rt, _swap_loop(host_dir, 2)))
        runner.start()
        time.sleep(0.05)
        taken, leaks, errors = _snapshot_while(rt, runner.is_alive, canary, environ)
        runner.join()
        assert not leaks, f"host files in the artifact ({taken} snapshots): {sorted(set(leaks))[:5]}"
        assert not errors, f"snapshot() raised ({taken} snapshots taken): {errors[:3]}"
    final = rt.snapshot()
    assert "d/s000" in final.files and not _leaks(final, canary, environ)


def test_swap_by_a_process_outliving_its_command_never_leaks_host_files(rt, host_secrets):
    host_dir, canary, environ = host_secrets
    assert bash(rt, _FILLER).ok
    # the call "returns" (a forged end marker) while the shell goes on swapping
    bash(rt, "builtin() { command printf \"$2\" \"$3\" 0; " + _swap_loop(host_dir, 2) + "; }; true")
    deadline = time.monotonic() + 2
    taken, leaks, errors = _snapshot_while(rt, lambda: time.monotonic() < deadline, canary, environ)
    assert not leaks, f"host files in the artifact ({taken} snapshots): {sorted(set(leaks))[:5]}"
    assert not errors, f"snapshot() raised ({taken} snapshots taken): {errors[:3]}"
