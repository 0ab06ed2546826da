"""The math check's warm-up (math-verify's import and first parse, most of a second) is paid in a
worker before it is ready, and only by pools whose tasks use the check."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

# a fresh process each: the forkserver is started once per process, with the preload it had then
_RUN = r"""
import json, sys
from proofgym import Artifact, Trace
from proofgym.env import VerificationJob
from proofgym.verify.pool import VerifierPool
from tests.verify.pool.math_probe_task import MathProbe
from tests.verify.pool.warmup_probe_tasks import WarmProbe

task = {"plain": WarmProbe, "math": MathProbe}[sys.argv[1]]("probe")
with VerifierPool("process", processes=1, max_in_flight=1, boot=False,
                  start_method=sys.argv[2]) as pool:
    pool.start([type(task).__module__] if sys.argv[3] == "known" else [])
    verdict = pool.submit(VerificationJob(task, Trace(), Artifact("inprocess")), "probe").result(120)
print(json.dumps([verdict.status, verdict.reward, "math_verify" in sys.modules]))
"""


def _probe(kind: str, start_method: str, modules: str) -> tuple[str, float, bool]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", _RUN, kind, start_method, modules], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    return tuple(json.loads(proc.stdout.splitlines()[-1]))


@pytest.mark.pure
@pytest.mark.parametrize("start_method", ["forkserver", "spawn"])
@pytest.mark.parametrize("modules", ["known", "learned from the job"])
def test_a_task_using_the_math_check_is_graded_by_a_warm_worker(start_method, modules):
    status, reward, in_owner = _probe("math", start_method, "known" if modules == "known" else "")
    assert status == "scored" and reward == 1.0, (status, reward)  # warm before the job ran
    assert not in_owner  # the owner (the CLI's main process) never pays for it


@pytest.mark.pure
@pytest.mark.parametrize("start_method", ["forkserver", "spawn"])
def test_a_pool_whose_tasks_never_check_math_never_loads_math_verify(start_method):
    status, reward, in_owner = _probe("plain", start_method, "known")
    assert status == "scored" and reward == 0.0, (status, reward)
    assert not in_owner


@pytest.mark.pure
def test_of_the_bundled_envs_only_arith_checks_math():
    code = ("import gymnasium, proofgym\n"
            "from proofgym.verify.pool.warmup import needs_math\n"
            "for name in ('Arith', 'Guess', 'CodeRepair', 'SearchQA'):\n"
            "    env = gymnasium.make(f'proofgym/{name}-v0').unwrapped\n"
            "    print(name, needs_math([type(next(iter(env.tasks))).__module__]))\n"
            "    env.close()\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.stdout.split() == ["Arith", "True", "Guess", "False", "CodeRepair", "False",
                                   "SearchQA", "False"], proc.stdout + proc.stderr
