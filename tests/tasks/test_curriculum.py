"""The curriculum sampler on Arith-v0, with real episodes graded by the real verifier."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections import Counter
from pathlib import Path

import gymnasium
import pytest

import proofgym  # noqa: F401 - registers the environments
from proofgym.core import ConfigError
from proofgym.tasks.curriculum import CURRICULUM_FILE, Curriculum
from tests.conftest import REPO

GROUP = 4  # attempts per chosen task, as in GRPO


def solves(task_id: str, level: str, step: int, attempt: int) -> bool:
    """The policy: always solves level 1, a level-2 task about half the time (a fixed hash, so
    the verdicts are reproducible), never levels 3 and 4."""
    if level == "1":
        return True
    if level == "2":
        return hashlib.sha256(f"{task_id}:{step}:{attempt}".encode()).digest()[0] % 2 == 0
    return False


class Player:
    def __init__(self) -> None:
        self.env = gymnasium.make("proofgym/Arith-v0").unwrapped

    def reward(self, task, solve: bool) -> float:
        """One real episode: the reference solution or the known-wrong answer, graded by the env."""
        self.env.reset(options={"task_id": task.id})
        trace = []
        for action in task.reference_solution() if solve else task.controls()["known_wrong"]:
            obs, _, _, _, _ = self.env.step(action)
            trace.append({"action": action, "obs": obs})
        return self.env.verify(trace).reward


def test_sampling_moves_to_the_level_with_mixed_outcomes_and_never_leaves_train():
    player = Player()
    tasks = player.env.tasks
    manifest = tasks.manifest
    cur = Curriculum(tasks, seed=3)
    choices = []
    for _ in range(120):
        choice = cur.next()
        choices.append(choice)
        for attempt in range(GROUP):
            ok = solves(choice.task.id, choice.level, choice.step, attempt)
            cur.update(choice.task.id, player.reward(choice.task, ok))
    assert {manifest.split_of(c.task.id) for c in choices} == {"train"}  # held-out and dev never
    train_levels = Counter(cur._level.values())
    base_share = train_levels["2"] / sum(train_levels.values())
    late = choices[40:]
    share = sum(c.level == "2" for c in late) / len(late)
    # measured here: level 2 is about a quarter of the train split but most of the late choices
    assert base_share < 0.35 and share > 0.6, (base_share, share, Counter(c.strategy for c in late))
    assert Counter(c.strategy for c in late).most_common(1)[0][0] == "informative"
    informative = [c for c in late if c.strategy == "informative"]
    assert all(0 < c.pass_rate < 1 and c.level == "2" for c in informative)
    rates = cur.pass_rates()
    assert all(rates[t] == 1.0 for t in rates if cur._level[t] == "1")
    assert all(rates[t] == 0.0 for t in rates if cur._level[t] in ("3", "4"))
    assert choices[0].to_dict()["strategy"] == "explore" and choices[0].to_dict()["seen"] == 0


def test_held_out_ids_are_refused_and_unscored_verdicts_ignored():
    tasks = gymnasium.make("proofgym/Arith-v0").unwrapped.tasks
    cur = Curriculum(tasks, seed=0)
    held = tasks.manifest.pool("heldout")[0]
    with pytest.raises(ConfigError, match="not a training task"):
        cur.update(held, 1.0)
    assert held not in cur.tasks
    cur.update(cur.tasks.ids[0], None)
    assert cur.pass_rates() == {}
    with pytest.raises(ConfigError, match="window"):
        Curriculum(tasks, window=0)


def test_deterministic_and_thread_safe():
    tasks = gymnasium.make("proofgym/Arith-v0").unwrapped.tasks

    def run(cur: Curriculum) -> list[str]:
        out = []
        for _ in range(60):
            c = cur.next()
            out.append(c.task.id)
            for a in range(GROUP):
                cur.update(c.task.id, float(solves(c.task.id, c.level, c.step, a)))
        return out

    assert run(Curriculum(tasks, seed=5)) == run(Curriculum(tasks, seed=5))
    assert run(Curriculum(tasks, seed=5)) != run(Curriculum(tasks, seed=6))
    shared = Curriculum(tasks, seed=1)
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            for _ in range(200):
                c = shared.next()
                shared.update(c.task.id, 1.0 if c.level == "1" else 0.0)
        except BaseException as exc:  # collected for the assertion below, not swallowed
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and shared.state()["step"] == 800  # no lost or doubled step


LOOP = textwrap.dedent('''
    import sys
    from pathlib import Path
    sys.path.insert(0, {repo!r})
    from tests.tasks.test_curriculum import GROUP, Player, solves
    from proofgym.tasks.curriculum import CURRICULUM_FILE, Curriculum

    run_dir, stop = Path(sys.argv[1]), int(sys.argv[2])
    player = Player()
    if (run_dir / CURRICULUM_FILE).exists():
        cur = Curriculum.resume(player.env.tasks, run_dir)
    else:
        cur = Curriculum(player.env.tasks, seed=11)
    while cur.state()["step"] < stop:
        c = cur.next()
        for attempt in range(GROUP):
            cur.update(c.task.id, player.reward(c.task, solves(c.task.id, c.level, c.step, attempt)))
        cur.save(run_dir)  # after the verdicts: a resumed run repeats no choice and loses none
        print(c.step, c.task.id, flush=True)
''')


@pytest.mark.slow
def test_resumes_after_sigkill_with_the_same_next_choices(tmp_path):
    script = tmp_path / "loop.py"
    script.write_text(LOOP.format(repo=str(REPO)))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    total = 40

    def run(run_dir: Path) -> dict[int, str]:
        out = subprocess.run([sys.executable, str(script), str(run_dir), str(total)], env=env,
                             capture_output=True, text=True, timeout=300, check=True).stdout
        return {int(s): t for s, t in (line.split() for line in out.splitlines())}

    whole = tmp_path / "whole"
    whole.mkdir()
    expected = run(whole)
    assert sorted(expected) == list(range(1, total + 1))

    killed = tmp_path / "killed"
    killed.mkdir()
    proc = subprocess.Popen([sys.executable, str(script), str(killed), str(total)], env=env,
                            stdout=subprocess.PIPE, text=True)
    seen = {}
    for line in proc.stdout:
        step, task_id = line.split()
        seen[int(step)] = task_id
        if int(step) == 15:
            proc.send_signal(signal.SIGKILL)  # mid-run, possibly mid-step
            break
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    saved = Curriculum.resume(Player().env.tasks, killed).state()["step"]
    assert 15 <= saved < total and (killed / CURRICULUM_FILE).is_file()
    resumed = run(killed)
    assert sorted(resumed) == list(range(saved + 1, total + 1))
    assert {s: seen[s] for s in seen if s <= saved} == {s: expected[s] for s in seen if s <= saved}
    assert resumed == {s: expected[s] for s in resumed}  # the same next choices
