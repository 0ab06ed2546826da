"""Attack class: any page two sandboxes share is a channel (a futex on an unchanged snapshot
file carries 32 bits), so a grading's code under test can signal hidden tests to a live episode
of the same task. Closed by time: a grading of a task never runs while an episode that could
profit from its hidden material is live on the host (``proofgym.runtimes.grading_lease``).

The episode runs in another process (a real env over a real sandbox, as ``eval``, ``serve`` or
a TRL worker would hold it); the grading runs here, and the moment its hidden tests are sent
into its sandbox is compared with the moment the episode was closed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import proofgym.verify.sandboxed.protocol as protocol
from proofgym.core import Task, TaskSpec, Trace
from proofgym.env import VerificationJob
from proofgym.envs.code_repair.task import CodeRepairTask
from proofgym.runtimes import Artifact
from proofgym.runtimes.grading_lease import (
    HiddenLease,
    LeaseTimeout,
    episode_lease,
    grading_lease,
    hidden_key_of,
)
from proofgym.verify.pool import VerifierPool
from proofgym.verify.sandboxed import run_pytest
from tests.conftest import REPO, require_tool

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "proofgym" / "envs" / "code_repair" / "data"
TASK, OTHER = DATA / "csv-quoted-fields", DATA / "date-range-inclusive-end"

#: Holds one episode of the task at argv[1] live (its agent has run a command) until a line
#: arrives on stdin, then freezes it (the artifact) and says when it began to.
_EPISODE = """
import sys, time
from proofgym.core import ToolCallAction
from proofgym.env import UniversalVerifiableEnv
from proofgym.envs.code_repair.task import CodeRepairTask
from proofgym.runtimes.sandbox import SandboxRuntime
task = CodeRepairTask.load(sys.argv[1])
env = UniversalVerifiableEnv(SandboxRuntime(prestart=False), tasks=[task])
env.reset(options={"task": task})
env.step(ToolCallAction("bash", {"command": "ls"}))
print("live", flush=True)
sys.stdin.readline()
print(f"closing {time.time()!r}", flush=True)
env.runtime.snapshot()
print("closed", flush=True)
sys.stdin.readline()
env.close()
"""


class Episode:
    """An episode of ``task`` live in another process."""

    def __init__(self, task: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", _EPISODE, str(task)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert self._line(60) == "live"

    def _line(self, timeout_s: float) -> str:
        assert self.proc.stdout is not None
        box: list[str] = []
        reader = threading.Thread(target=lambda: box.append(self.proc.stdout.readline()))
        reader.start()
        reader.join(timeout_s)
        assert box, f"the episode process said nothing in {timeout_s} s"
        return box[0].strip()

    def close(self) -> float:
        """Freeze the episode; when the freeze began (``time.time()``)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        said = self._line(60)
        assert said.startswith("closing "), said
        assert self._line(60) == "closed"
        return float(said.split()[1])

    def end(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)


class Grading(threading.Thread):
    """A grading of ``task`` (its reference fix) on a thread; ``sent`` is when its hidden tests
    were sent into its sandbox."""

    def __init__(self, task: Path, sent: dict[int, float]) -> None:
        super().__init__(daemon=True)
        self.task = CodeRepairTask.load(task)
        self.sent, self.run_result = sent, None

    def run(self) -> None:
        t = self.task
        self.run_result = run_pytest(t.repo, t.solution_files, tests=t.test_ids,
                                     hidden=t.hidden_files, protected=t.protected,
                                     timeout_s=t.grading_timeout_s)


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> dict[int, float]:
    """Thread id -> when that thread's grading sent its job (the hidden tests) to its runner."""
    require_tool("bwrap")
    seen: dict[int, float] = {}
    real = protocol.send_job

    def send(fd: int, job: bytes) -> None:
        seen.setdefault(threading.get_ident(), time.time())
        real(fd, job)
    monkeypatch.setattr(protocol, "send_job", send)
    return seen


@pytest.mark.sandbox
def test_a_grading_waits_until_the_live_episode_of_its_task_is_closed(sent):
    episode = Episode(TASK)
    try:
        grading = Grading(TASK, sent)
        grading.start()
        time.sleep(3.0)  # a grading takes about this to boot and send its job on a quiet host
        assert not sent, "the grading sent its hidden tests while an episode of its task was live"
        closed_at = episode.close()
        grading.join(120)
        assert not grading.is_alive()
        (sent_at,) = sent.values()
        assert sent_at > closed_at, "the hidden tests entered a sandbox before the episode closed"
        assert grading.run_result is not None and grading.run_result.results
        assert set(grading.run_result.results.values()) == {"passed"}
    finally:
        episode.end()


@pytest.mark.sandbox
def test_a_grading_of_another_task_does_not_wait(sent):
    episode = Episode(TASK)
    try:
        grading = Grading(OTHER, sent)
        grading.start()
        grading.join(120)
        assert not grading.is_alive() and sent, "a grading of another task waited for the episode"
        assert episode.proc.poll() is None  # still live: never told to close
        assert grading.run_result is not None and grading.run_result.results
    finally:
        episode.end()


@pytest.mark.sandbox
def test_a_killed_episode_process_releases_its_lease(sent):
    episode = Episode(TASK)
    try:
        grading = Grading(TASK, sent)
        grading.start()
        time.sleep(2.0)
        assert not sent
        killed_at = time.time()
        os.kill(episode.proc.pid, signal.SIGKILL)
        grading.join(120)
        assert not grading.is_alive() and sent
        (sent_at,) = sent.values()
        assert sent_at > killed_at
        assert grading.run_result is not None and grading.run_result.results
    finally:
        episode.end()


# ------------------------------------------------------------------ the lease itself, and the pool
def _key(name: str) -> str:
    return hidden_key_of({"hidden/test_x.py": name.encode()}, "/nonexistent")


def test_episodes_share_gradings_share_and_a_waiting_grading_holds_new_episodes_back():
    key = _key(f"semantics-{os.getpid()}-{time.time()}")
    first = episode_lease(key)
    second = episode_lease(key, timeout_s=1.0)  # episodes of one key share
    grading = HiddenLease(key, "grading")
    assert not grading.poll()  # two episodes live
    # the waiting grading holds new episodes back, those of another process (this process
    # holds live episodes of the key, see the next test)
    assert _episode_in_another_process(key, timeout_s=0.3) == "LeaseTimeout"
    first.release()
    assert not grading.poll()
    second.release()
    assert grading.poll()
    other = grading_lease(key, timeout_s=1.0)  # gradings share
    with pytest.raises(LeaseTimeout):
        episode_lease(key, timeout_s=0.3)
    assert episode_lease(_key("another task"), timeout_s=1.0).granted  # another key: no wait
    grading.release()
    other.release()
    episode_lease(key, timeout_s=1.0).release()


def _episode_in_another_process(key: str, timeout_s: float) -> str:
    """Whether another process gets an episode lease of ``key`` within ``timeout_s``."""
    script = ("import sys\n"
              "from proofgym.runtimes.grading_lease import LeaseTimeout, episode_lease\n"
              "try:\n"
              "    episode_lease(sys.argv[1], timeout_s=float(sys.argv[2])).release()\n"
              "    print('granted')\n"
              "except LeaseTimeout:\n"
              "    print('LeaseTimeout')\n")
    proc = subprocess.run([sys.executable, "-c", script, key, str(timeout_s)], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_a_process_with_a_live_episode_starts_another_while_a_grading_waits():
    """A trainer resets its environments one after another (a GRPO group: one task, several
    copies) while a grading of that task, from another process, waits for the first episode to
    end. That episode ends only after the trainer's next reset, so the next episode cannot wait for
    the grading: it did (the fairness rule), and both waited out the hour-long lease timeout (the
    suite's GRPO and trainer-exit tests hung 15 minutes on each other). An episode of a key whose
    process holds a live episode of it starts at once; the grading still waits for all of them,
    and a process that holds none waits for the grading as before."""
    key = _key(f"deadlock-{os.getpid()}-{time.time()}")
    first = episode_lease(key)
    grading = HiddenLease(key, "grading")
    assert not grading.poll()  # it waits, and holds its share: new episodes of others wait
    second = episode_lease(key, timeout_s=0.5)  # the trainer's next reset: no wait
    assert second.granted
    assert not grading.poll()
    assert _episode_in_another_process(key, timeout_s=0.3) == "LeaseTimeout"
    first.release()
    assert not grading.poll()  # the second episode is live
    second.release()
    assert grading.poll()  # no episode live: the grading runs
    with pytest.raises(LeaseTimeout):  # while it runs, no episode of the key starts here either
        episode_lease(key, timeout_s=0.3)
    grading.release()
    episode_lease(key, timeout_s=1.0).release()


@dataclass(frozen=True, eq=False)
class KeyedTask(Task):
    """A task with hidden material under ``key`` whose grading only notes when it ran."""

    name: str
    key: str
    log: list = field(default_factory=list, compare=False)

    @property
    def id(self) -> str:
        return self.name

    @property
    def hidden_key(self) -> str:  # type: ignore[override]
        return self.key

    def get_spec(self) -> TaskSpec:
        return TaskSpec(self.name)

    def verify(self, trace: Trace, runtime: object) -> float:
        self.log.append((self.name, time.time()))
        return 1.0


_HOLDER = """
import sys
from proofgym.runtimes.grading_lease import episode_lease
lease = episode_lease(sys.argv[1])
print("live", flush=True)
sys.stdin.readline()
lease.release()
print("closed", flush=True)
sys.stdin.readline()
"""


def test_a_pool_job_waits_for_its_lease_outside_its_timeout_and_other_tasks_go_on():
    """A pool's job of a task whose episode is live elsewhere waits before it is handed out: not
    a timeout (the episode outlasts the job's limit), and a job of another task is graded
    meanwhile."""
    key = _key(f"pool-{os.getpid()}-{time.time()}")
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, key], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert holder.stdout is not None and holder.stdin is not None
        assert holder.stdout.readline().strip() == "live"
        log: list = []
        with VerifierPool("inline", timeout_s=0.5, max_in_flight=1) as pool:
            waiting = pool.submit(VerificationJob(KeyedTask("t", key, log), Trace(),
                                                  Artifact("inprocess")), "t")
            other = pool.submit(VerificationJob(KeyedTask("u", _key("u"), log), Trace(),
                                                Artifact("inprocess")), "u")
            assert other.result(10).reward == 1.0  # not behind the waiting job's slot
            time.sleep(1.0)  # twice the job's timeout
            assert not waiting.done()
            holder.stdin.write("\n")
            holder.stdin.flush()
            assert holder.stdout.readline().strip() == "closed"
            closed_at = time.time()
            verdict = waiting.result(10)
        assert verdict.status == "scored" and verdict.reward == 1.0, verdict
        assert [n for n, _ in log] == ["u", "t"] and log[1][1] >= closed_at
    finally:
        holder.kill()
        holder.wait(10)
