"""The CLI's start-up imports only what a run needs: the sandbox's modules load on first use."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROBE = """
import json, sys
import proofgym.cli.main
before = sorted(m for m in sys.modules if m.startswith("proofgym.runtimes.sandbox"))
import proofgym
runtime = proofgym.SandboxRuntime
limits = proofgym.SandboxLimits
print(json.dumps({"before": before, "runtime": runtime.__module__, "limits": limits.__name__,
                  "exported": all(n in proofgym.__all__ for n in ("SandboxRuntime", "SandboxLimits"))}))
"""


def test_cli_start_up_leaves_the_sandbox_unloaded_and_the_names_still_resolve() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env,
                          timeout=120, check=True)
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["before"] == []
    assert seen["runtime"] == "proofgym.runtimes.sandbox.runtime"
    assert seen["limits"] == "SandboxLimits"
    assert seen["exported"] is True
