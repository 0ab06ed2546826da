"""Peak memory of the eval process for one hostile episode, measured in a fresh process.

    python bench/artifact_memory.py            # a hostile episode, over the artifact limits
    python bench/artifact_memory.py --largest  # the largest artifact the default limits allow

The hostile episode writes 2 GiB of sparse files (32 x 64 MiB, the per-file limit), 20,000 small files
and 200 MiB of real data, then the runtime takes its snapshot and serialises the artifact as a
run record would (``to_dict`` + JSON). Prints the process's peak RSS and the artifact's size.
"""

from __future__ import annotations

import json
import resource
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from proofgym.runtimes.sandbox import SandboxLimits, SandboxRuntime

EPISODE = r"""python - <<'EOF'
import os
for i in range(32):
    with open(f"sparse{i}", "wb") as f:
        f.truncate(64 << 20)
os.makedirs("many", exist_ok=True)
for i in range(20000):
    with open(f"many/f{i}", "w") as f:
        f.write("x" * 100)
for i in range(4):
    with open(f"real{i}", "wb") as f:
        f.write(os.urandom(50 << 20))
print("written")
EOF"""

# just under the defaults: 9,999 files holding 32 MiB - 64 KiB in all (incompressible)
LARGEST = r"""python - <<'EOF'
import os
os.makedirs("many", exist_ok=True)
size = ((32 << 20) - (64 << 10)) // 9999
for i in range(9999):
    with open(f"many/f{i}", "wb") as f:
        f.write(os.urandom(size))
print("written")
EOF"""


def main() -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    limits = SandboxLimits(command_timeout_s=120, workspace_mb=512)
    with tempfile.TemporaryDirectory() as tmp, SandboxRuntime(Path(tmp), limits=limits,
                                                               prestart=False) as rt:
        r = rt.execute("bash", {"command": LARGEST if "--largest" in sys.argv else EPISODE})
        print("episode:", r.output[-200:].replace("\n", " | "))
        art = rt.snapshot()
        record = json.dumps(art.to_dict())
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"files in artifact: {len(art.files)}; limit_exceeded: {art.meta.get('limit_exceeded')}")
    print(f"record size: {len(record)} bytes")
    print(f"peak RSS: {peak / 1024:.0f} MiB (before the episode: {before / 1024:.0f} MiB)")


if __name__ == "__main__":
    main()
