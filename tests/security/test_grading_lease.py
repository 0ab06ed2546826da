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
from pathlib import Path

import pytest

import proofgym.verify.sandboxed.isolated as isolated
from proofgym.envs.code_repair.task import CodeRepairTask
from proofgym.verify.sandboxed import run_pytest
from tests.conftest import require_tool

pytestmark = pytest.mark.sandbox

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
    real = isolated._send_job

    def send(fd: int, job: bytes) -> None:
        seen.setdefault(threading.get_ident(), time.time())
        real(fd, job)
    monkeypatch.setattr(isolated, "_send_job", send)
    return seen


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
