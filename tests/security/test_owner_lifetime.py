"""Nothing of a run outlives its owner: not after SIGKILL, not after an exit without ``close()``.

The owner here is a real ``proofgym eval`` (or a trainer-like script) in a child process whose
temp dir (``TMPDIR``) is private to the test, so only its own leftovers are counted. What must be
gone, with no later run to sweep anything: every process it started (grader workers, the
forkserver, spawners, ``bwrap`` and the sandboxes' processes), every mount under its temp dir
(the scratch tmpfs as root), every sandbox or grading scratch directory, every cgroup named
after one of its processes. Gone means gone within a few seconds: the check polls up to
``_BOUND_S`` (a loaded 2-core machine) and prints how long it took.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO, require_tool

pytestmark = pytest.mark.sandbox

#: How long the leftovers may take to go (the goal is well under a second; the machine is loaded).
_BOUND_S = 5.0
_SCRATCH = ("proofgym-sandbox-", "proofgym-grade-")


# ------------------------------------------------------------------ what a run leaves
def _state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            ppid = int(Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(name))
    found: set[int] = set()
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def _alive(pids: set[int]) -> list[int]:
    """The processes of ``pids`` still running (a zombie has exited: only its entry is left)."""
    return sorted(p for p in pids if _state(p) not in (None, "Z", "X"))


def _mounts_under(root: Path) -> list[str]:
    points = [ln.split()[4] for ln in Path("/proc/self/mountinfo").read_text().splitlines()]
    return [p for p in points if p == str(root) or p.startswith(f"{root}/")]


def _scratch(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.name.startswith(_SCRATCH))


def _cgroups_of(pids: set[int]) -> list[str]:
    prefixes = tuple(f"proofgym-{p}-" for p in pids)
    return [os.path.join(base, d) for base, dirs, _ in os.walk("/sys/fs/cgroup")
            for d in dirs if d.startswith(prefixes)] if prefixes else []


def _leftovers(tmpdir: Path, pids: set[int]) -> dict[str, list]:
    return {"processes": _alive(pids), "mounts": _mounts_under(tmpdir),
            "scratch": _scratch(tmpdir), "cgroups": _cgroups_of(pids),
            # multiprocessing's temp dir (the forkserver's socket): the pool's process removes it
            # at its exit, the forkserver when that process was killed
            "temp": sorted(p.name for p in tmpdir.iterdir() if p.name.startswith("pymp-"))}


_NOTHING: dict[str, list] = {"processes": [], "mounts": [], "scratch": [], "cgroups": [], "temp": []}


def _wait_for_nothing(tmpdir: Path, pids: set[int], since: float, what: str,
                      but: tuple[str, ...] = ()) -> float:
    """Poll until nothing of the run is left (at most ``_BOUND_S``), ``but`` those kinds of
    leftover not counted; return how long it took."""
    while True:
        left = {k: v for k, v in _leftovers(tmpdir, pids).items() if k not in but}
        if but:
            left.update({k: [] for k in but})
        took = time.monotonic() - since
        if left == _NOTHING or took > _BOUND_S:
            break
        time.sleep(0.02)
    print(f"{what}: left {left} after {took:.2f} s")
    alive = {p: _describe(p) for p in left.get("processes", [])}
    for cg in left.get("cgroups", []):  # what keeps a cgroup from being removed
        procs = Path(cg, "cgroup.procs")
        for pid in procs.read_text().split() if procs.exists() else ():
            alive[f"in {Path(cg).name}: {pid}"] = _describe(int(pid))
    assert left == _NOTHING, f"{what}: still there {took:.1f} s later: {left}; alive: {alive}"
    return took


def _describe(pid: int) -> str:
    """What a process left behind is (its state, parent and command line), for the message."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")[:160].decode(errors="replace")
        wchan = Path(f"/proc/{pid}/wchan").read_text()
    except (OSError, IndexError):
        return "gone"
    return f"state {stat[0]} ppid {stat[1]} wchan {wchan} cmd {argv}"


def _cleanup(tmpdir: Path, pids: set[int]) -> None:
    """Put the host back whatever the run left (the test may well have failed)."""
    for p in _alive(pids):
        try:
            os.kill(p, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            continue
    time.sleep(0.3)
    if os.geteuid() == 0:
        for point in sorted(_mounts_under(tmpdir), key=len, reverse=True):
            subprocess.run(["umount", "-l", point], check=False, capture_output=True)
    for cg in _cgroups_of(pids):
        try:
            os.rmdir(cg)
        except OSError:
            continue
    subprocess.run(["chmod", "-R", "u+rwx", str(tmpdir)], check=False, capture_output=True)
    subprocess.run(["rm", "-rf", "--one-file-system", str(tmpdir)], check=False)


@pytest.fixture
def tmpdir() -> Iterator[Path]:
    # not under pytest's tmp_path: that is private to its owner, and a sandbox that runs as an
    # unprivileged uid must reach the staged system the runtime keeps in TMPDIR
    path = Path(tempfile.mkdtemp(prefix="proofgym-lifetime-"))
    path.chmod(0o755)
    yield path
    _cleanup(path, set())


def _env(tmpdir: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{tmpdir}", "TMPDIR": str(tmpdir),
            "HF_HUB_OFFLINE": "1", "TRL_EXPERIMENTAL_SILENCE": "1"}


def _watch(proc: subprocess.Popen, until: float, ready) -> set[int]:  # type: ignore[type-arg]
    """The processes of ``proc`` seen while it runs, once ``ready()`` holds (and a little after)."""
    seen: set[int] = set()
    while not ready():
        assert proc.poll() is None, f"the run ended early ({proc.returncode}): {_output(proc)}"
        assert time.monotonic() < until, f"the run never got there: {_output(proc)}"
        seen |= _descendants(proc.pid)
        time.sleep(0.05)
    for _ in range(10):  # the grading is under way: collect what it started
        seen |= _descendants(proc.pid)
        time.sleep(0.05)
    return seen


def _output(proc: subprocess.Popen) -> str:  # type: ignore[type-arg]
    if proc.poll() is None:
        proc.kill()
    out, _ = proc.communicate(timeout=30)
    return (out or b"").decode(errors="replace")[-3000:]


def _kill_and_check(proc: subprocess.Popen, tmpdir: Path, seen: set[int], what: str,  # type: ignore[type-arg]
                    group: bool = False) -> float:
    """SIGKILL ``proc`` (with ``group``: its whole process group, as a terminal's kill or
    ``timeout -s KILL`` does) and check that nothing of it is left."""
    pids = seen | {proc.pid}
    try:
        assert _alive(seen), f"positive control: the run had started processes ({what})"
        if group:
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        proc.wait(timeout=30)
        # killed with its group, the forkserver cannot remove multiprocessing's temp dir (a
        # socket; see docs/threat-model.md); everything else must go
        return _wait_for_nothing(tmpdir, pids, killed, what, but=("temp",) if group else ())
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        _cleanup(tmpdir, pids)


# ----------------------------------------------------- SIGKILL of `proofgym eval`
_SLOW_GRADER_ENV = '''
import dataclasses, os, time
import gymnasium
from proofgym.testing.sleepy import make_env

MARK = os.environ["LIFETIME_MARK"]

class HangingTask:
    """Grades after a minute (a grader stuck on a remote runner); says when it started."""
    def __init__(self, inner):
        self.inner = inner
    def __getattr__(self, name):
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)
    def verify(self, trace, runtime):
        open(os.path.join(MARK, f"grading-{os.getpid()}-{time.monotonic_ns()}"), "w").close()
        time.sleep(60)
        return self.inner.verify(trace, runtime)

def make():
    env = make_env(step_s=0.0, n_tasks=4)
    job = env.verification_job
    env.verification_job = lambda trace: dataclasses.replace(job(trace), task=HangingTask(job(trace).task))
    return env

gymnasium.register("lifetime/HangingGrader-v0", entry_point=make)
'''


@pytest.mark.slow
def test_sigkill_of_eval_ends_its_grader_workers_at_once(tmpdir):
    """``proofgym eval`` with the default (process) verifier, killed while its graders hang: its
    worker processes (and the forkserver) go at once, not when their graders finish."""
    (tmpdir / "lifetime_envs.py").write_text(_SLOW_GRADER_ENV)
    mark = tmpdir / "mark"
    mark.mkdir()
    env = {**_env(tmpdir), "LIFETIME_MARK": str(mark)}
    proc = subprocess.Popen([sys.executable, "-m", "proofgym", "eval",
                             "lifetime_envs:lifetime/HangingGrader-v0", "-n", "4", "-c", "2",
                             "--grader-processes", "2", "--out", str(tmpdir / "run")],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    seen = _watch(proc, time.monotonic() + 240, lambda: len(list(mark.iterdir())) >= 2)
    took = _kill_and_check(proc, tmpdir, seen, "after SIGKILL of proofgym eval (hanging graders)")
    assert took < _BOUND_S


@pytest.mark.slow
@pytest.mark.parametrize("whom", ["process", "process group"])
def test_sigkill_of_eval_on_code_repair_leaves_no_process_mount_or_scratch(tmpdir, whom):
    """CodeRepair: episode sandboxes (a scratch tmpfs each, as root) and grading sandboxes in the
    grader workers are all running when ``proofgym eval`` is killed: the process alone, or its
    whole process group (the grader workers and the forkserver die at the same instant). No
    later run sweeps: all of it must go by itself."""
    require_tool("bwrap")
    proc = subprocess.Popen([sys.executable, "-m", "proofgym", "eval", "proofgym/CodeRepair-v0",
                             "-n", "8", "-c", "2", "--grader-processes", "2",
                             "--out", str(tmpdir / "run")],
                            env=_env(tmpdir), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)

    def grading() -> bool:
        names = _scratch(tmpdir)
        return any(n.startswith("proofgym-grade-") for n in names) and any(
            n.startswith("proofgym-sandbox-") for n in names)

    seen = _watch(proc, time.monotonic() + 400, grading)
    assert _scratch(tmpdir), "positive control: the counters see the run's scratch space"
    if os.geteuid() == 0:
        assert _mounts_under(tmpdir), "positive control: as root the scratch space is a tmpfs"
    _kill_and_check(proc, tmpdir, seen, f"after SIGKILL of proofgym eval's {whom} on CodeRepair",
                    group=whom == "process group")


# ------------------------------------------------- exits without close()
_TRAINER = '''
import os, sys
from proofgym.core import ToolCallAction
from proofgym.integrations.trl import EnvironmentReward, environment_factory
from proofgym.envs.code_repair import make_env

task = make_env().tasks.get("interval-merge-touching")
fix = next(a for a in task.reference_solution()
           if isinstance(a, ToolCallAction) and a.tool_name in ("str_replace", "write_file"))
Env = environment_factory("proofgym/CodeRepair-v0")
reward = EnvironmentReward(processes=1)
envs = [Env(), Env()]
for e in envs:
    e.reset(task_id=task.id)
getattr(envs[0], fix.tool_name)(**fix.tool_input)
print("REWARDS", reward(completions=["Fixed.", "Fixed."], environments=envs), flush=True)
print("READY", flush=True)
sys.stdin.readline()
if sys.argv[1] == "os._exit":
    os._exit(0)  # as multiprocessing ends its children: no atexit, no finalizer
# else: the interpreter's ordinary exit, with nothing closed by hand (as the docs' GPU recipe)
'''


@pytest.mark.slow
@pytest.mark.parametrize("how", ["return", "os._exit"])
def test_a_trainer_that_exits_without_close_leaves_nothing(tmpdir, how):
    """A TRL trainer-like process with CodeRepair sandboxes (episodes here, gradings in its
    grader worker) that ends without ``reward.close()`` or closing its envs: by returning, or by
    ``os._exit`` (which skips every atexit hook and finalizer)."""
    require_tool("bwrap")
    proc = subprocess.Popen([sys.executable, "-c", _TRAINER, how], env=_env(tmpdir),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    pids: set[int] = {proc.pid}
    try:
        assert proc.stdout is not None and proc.stdin is not None
        lines = []
        while not lines or lines[-1] != "READY":
            line = proc.stdout.readline().decode(errors="replace")
            assert line, f"the trainer ended early: {''.join(lines)}"
            lines.append(line.strip())
        assert "REWARDS [1.0, 0.0]" in lines, lines  # it graded for real, in its sandboxes
        pids |= _descendants(proc.pid)
        assert _alive(pids - {proc.pid}) and _scratch(tmpdir), "positive control: it has sandboxes"
        proc.stdin.write(b"\n")
        proc.stdin.flush()
        proc.wait(timeout=120)
        _wait_for_nothing(tmpdir, pids, time.monotonic(), f"after the trainer's exit ({how})")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        _cleanup(tmpdir, pids)


_RUNTIME_EXIT = textwrap.dedent('''
    import os, sys
    from proofgym.runtimes.sandbox import SandboxRuntime
    rt = SandboxRuntime()
    assert rt.execute("bash", {"command": "mkdir d && echo x > d/f && cat d/f"}).output == "x"
    print("READY", flush=True)
    sys.stdin.readline()
    os._exit(0)
''')


def test_a_runtime_whose_owner_calls_os_exit_leaves_nothing(tmpdir):
    """``os._exit`` right after a command: no atexit hook runs, and still nothing is left."""
    require_tool("bwrap")
    proc = subprocess.Popen([sys.executable, "-c", _RUNTIME_EXIT], env=_env(tmpdir),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    pids: set[int] = {proc.pid}
    try:
        assert proc.stdout is not None and proc.stdin is not None
        line = proc.stdout.readline()
        assert line.strip() == b"READY", line + proc.stdout.read()
        pids |= _descendants(proc.pid)
        assert _alive(pids - {proc.pid}) and _scratch(tmpdir), "positive control: it has a sandbox"
        proc.stdin.write(b"\n")
        proc.stdin.flush()
        proc.wait(timeout=60)
        _wait_for_nothing(tmpdir, pids, time.monotonic(), "after os._exit of a runtime's owner")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        _cleanup(tmpdir, pids)


# ------------------------------------------- a grader worker killed by its pool
_KILLED_WORKER = '''
import sys, time
from proofgym.envs.code_repair import make_env
from proofgym.rollout import ReferencePolicy
from proofgym.core import TraceStep
from proofgym.verify.pool import VerifierPool

env = make_env()
task = env.tasks.get("interval-merge-touching")
obs, info = env.reset(options={"task": task})
policy = ReferencePolicy()
policy.start(task, obs, info, env.action_space)
steps, done = [], False
while not done:
    action = policy.act(obs)
    obs, _, terminated, truncated, info = env.step(action)
    steps.append(TraceStep(action, obs))
    done = terminated or truncated
job = env.verification_job(steps)
env.close()
pool = VerifierPool("process", processes=1, timeout_s=60)
pool.grade_sync(job, "first")
# graded again: the worker is up and keeps a spare runner for the next grading of the task
print("GRADED", pool.grade_sync(job, "again").status, flush=True)
sys.stdin.readline()  # the test notes the worker's processes
future = pool.submit(job, "cut short")
time.sleep(0.3)
pool.close()  # a job in flight: the worker is killed (SIGKILL), as for a timed-out job
print("CLOSED", future.result().status, flush=True)
sys.stdin.readline()  # this process lives on while the test looks
'''


@pytest.mark.slow
def test_a_grader_worker_killed_by_its_pool_leaves_no_grading_scratch(tmpdir):
    """The pool kills a worker (``SIGKILL``) that has a job in flight (on ``close()``, or when a
    job times out) while the pool's own process lives on. The worker's grading sandboxes (its
    pre-booted runners, the grading under way) and their scratch space (a tmpfs as root) go with
    the worker, not when the pool's process ends."""
    require_tool("bwrap")
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_WORKER], env=_env(tmpdir),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    pids: set[int] = {proc.pid}
    try:
        assert proc.stdout is not None and proc.stdin is not None

        def line() -> str:
            text = proc.stdout.readline().decode(errors="replace")
            assert text, f"the script ended early: {_output(proc)}"
            return text.strip()

        while not (text := line()).startswith("GRADED"):
            pass
        assert text == "GRADED scored", text
        workers = _descendants(proc.pid)
        pids |= workers

        def of_workers(names: list[str]) -> list[str]:
            return [n for n in names if "proofgym-grade-" in n
                    and int(Path(n).name.split("-")[2]) in workers]

        assert of_workers(_scratch(tmpdir)), "positive control: the worker keeps grading sandboxes"
        proc.stdin.write(b"\n")
        proc.stdin.flush()
        assert line() == "CLOSED error", "the job cut short is an error verdict"
        killed = time.monotonic()
        while True:
            # the pool's process lives on, and so do its forkserver and a fresh worker: what
            # was the killed worker's is no longer a descendant of it
            left = {"processes": _alive(workers - _descendants(proc.pid)),
                    "grade scratch": of_workers(_scratch(tmpdir)),
                    "mounts": of_workers(_mounts_under(tmpdir))}
            took = time.monotonic() - killed
            if not any(left.values()) or took > _BOUND_S:
                break
            time.sleep(0.02)
        print(f"after the pool killed its worker: left {left} after {took:.2f} s")
        assert proc.poll() is None, "the pool's process lives on"
        assert not any(left.values()), left
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        _cleanup(tmpdir, pids)


# ------------------------------------- a sandbox process its bwrap no longer holds
_ORPHAN_HOST = '''
import os, subprocess, sys, time
from proofgym.runtimes.sandbox import cgroups
from proofgym.runtimes.sandbox.namespaces import remove_at_exit

group = cgroups.create(64 << 20, 8)
for d in group.dirs:
    remove_at_exit(d, "cgroup")
# a process in the sandbox cgroup whose parent is already gone (as a sandbox's pid 1 is when its
# bwrap dies before --die-with-parent armed it): no kill of the spawner's children reaches it
orphan = subprocess.Popen(["/bin/sh", "-c", "sleep 1000 & echo $!"], stdout=subprocess.PIPE,
                          start_new_session=True)
pid = int(orphan.stdout.readline())
orphan.wait()
for procs in group.procs_files():
    with open(procs, "w") as f:
        f.write(str(pid))
print(pid, *group.dirs, flush=True)
time.sleep(1000)
'''


@pytest.mark.skipif(os.geteuid() != 0, reason="sandbox cgroups are made as root only")
def test_sigkill_of_the_host_kills_an_orphan_left_in_a_sandbox_cgroup_and_removes_it(tmpdir):
    """The keeper kills what is still in a cgroup it owns (each process checked to be a member
    through a pidfd), then removes it: a cgroup is never left behind by a sandbox process that
    outlived its bwrap (seen as a sandbox's pid 1, reparented to init, after SIGKILL of eval)."""
    require_tool("bwrap")
    host = subprocess.Popen([sys.executable, "-c", _ORPHAN_HOST], env=_env(tmpdir),
                            stdout=subprocess.PIPE, text=True)
    orphan = 0
    try:
        line = host.stdout.readline().split()
        assert line, f"the host did not start ({host.poll()})"
        orphan, dirs = int(line[0]), [Path(d) for d in line[1:]]
        assert _alive({orphan}) and all(d.is_dir() for d in dirs), "positive control"
        host.kill()
        killed = time.monotonic()
        host.wait(timeout=30)
        while (_alive({orphan}) or any(d.exists() for d in dirs)) and time.monotonic() - killed < _BOUND_S:
            time.sleep(0.02)
        assert not _alive({orphan}), "the orphan in the sandbox cgroup outlived its host's keeper"
        assert not [d for d in dirs if d.exists()], "the sandbox cgroup was left behind"
    finally:
        if host.poll() is None:
            host.kill()
        if orphan and _alive({orphan}):
            os.kill(orphan, signal.SIGKILL)
