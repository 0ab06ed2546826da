"""Shared fixtures. Tests use real parts: real subprocesses, real files, real sandboxes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import proofgym  # noqa: F401 - registers the bundled environments

#: The ``sandbox`` fixture (a real bubblewrap SandboxRuntime) for the sandbox tests.
pytest_plugins = ["tests.sandbox_helpers"]

REPO = Path(__file__).resolve().parents[1]
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def require_tool(name: str) -> str:
    """The path of a system tool. Missing: a failure in CI (never a silent skip), a skip locally."""
    path = shutil.which(name)
    if path is None:
        message = f"{name!r} is not installed (apt-get install -y {name})"
        if IN_CI:
            pytest.fail(f"{message}; CI must install it in .ci/run")
        pytest.skip(message)
    return path


def run_cli(*args: str, cwd: Path | None = None, timeout: float = 300,
            check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``python -m proofgym ARGS`` as a real subprocess against this checkout."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    proc = subprocess.run([sys.executable, "-m", "proofgym", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"proofgym {' '.join(args)} exited {proc.returncode}\n"
                             f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc


@pytest.fixture
def cli():
    return run_cli


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``slow`` first (a stable sort: the order is otherwise unchanged, and the same
    in every pytest-xdist worker): the long tests start while there is other work to run beside
    them, so no core idles at the end waiting for one.

    And the tests of a module that share a module-scoped fixture (a run played and graded once
    for several tests) run on one xdist worker: spread over four, each worker built the fixture
    again (the CodeRepair hack run of tests/cli/test_audit.py twice, some 40 s of sandboxes)."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        info = getattr(item, "_fixtureinfo", None)
        if info is not None and any(d.scope == "module" for defs in info.name2fixturedefs.values()
                                    for d in defs):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))


#: The xdist group of the tests that read :func:`code_repair_reference_run` (one worker makes it).
CODE_REPAIR_REFERENCE = "code_repair_reference"


@pytest.fixture(scope="session")
def code_repair_reference_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``proofgym eval proofgym/CodeRepair-v0 --policy reference`` on every task (real sandboxes),
    made once for the tests that read it (mark them ``xdist_group(CODE_REPAIR_REFERENCE)``): the
    CLI test and the audit of a reference run each made the same run of 16 sandboxed tasks
    (some 20 s of CPU). Its readers only read it (``proofgym audit`` adds ``audit.json``)."""
    require_tool("bwrap")
    out = tmp_path_factory.mktemp("code-repair-reference") / "run"
    run_cli("eval", "proofgym/CodeRepair-v0", "--policy", "reference", "--out", str(out), timeout=600)
    return out


@pytest.fixture(scope="session")
def code_repair_controls_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """Every control of CodeRepair's first task, played and graded (real sandboxes, a process
    verifier pool of 2) as one run directory, and its trajectories by control name. Made once for
    the audit of the hacks (tests/cli/test_audit.py) and the control sweep (its first task) of
    tests/verify/sandboxed/test_code_repair.py (mark them ``xdist_group(CODE_REPAIR_REFERENCE)``):
    both played and graded these same 22 episodes, some 17 s of CPU each time."""
    from proofgym.eval.runner import plan_episodes, run_plan
    from proofgym.make import make_env
    from proofgym.rollout import ControlPolicy
    from proofgym.verify.pool import VerifierPool

    require_tool("bwrap")
    out = tmp_path_factory.mktemp("controls") / "hacks"
    out.mkdir()
    env = make_env("proofgym/CodeRepair-v0")
    task = env.tasks[0]
    played, lines = {}, []
    try:
        with VerifierPool("process", processes=2) as pool:
            for name in sorted(task.controls()):
                [traj] = run_plan(env, ControlPolicy(name), plan_episodes([task.id], episodes=1),
                                  verifier=pool, env_id="proofgym/CodeRepair-v0")
                traj.extra["control"] = name
                # one episode per control, each of its own run: ids made unique for one run file
                traj.trajectory_id = f"{name}/{traj.trajectory_id}"
                played[name] = traj
                lines.append(traj.to_json())
    finally:
        env.close()
    (out / "trajectories.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    return out, played


@pytest.fixture(autouse=True)
def _grading_spares_kept_per_test():
    """A test that synthesises tasks calls ``keep_no_spares()`` (synthesis turns grading spares
    off for the rest of its process); in an xdist worker that would leave every later test of
    the worker without spares, so a spare test would wait for one in vain, or skip. Each test
    starts with the process's configured number of spares."""
    yield
    module = sys.modules.get("proofgym.verify.sandboxed.warm_runners")
    if module is not None:
        module.WARM.max_spares = int(os.environ.get("PROOFGYM_GRADING_SPARES", module.MAX_SPARES))
