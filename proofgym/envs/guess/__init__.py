"""``proofgym/Guess-v0``: guess a hidden number; the environment answers at each turn boundary.

A multi-turn dialogue that exercises ``on_turn_complete``, termination (a correct guess) and
truncation (the turn budget runs out).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from typing import Any

from proofgym.core import (
    ActionScript,
    AgentAction,
    Limits,
    Task,
    TaskSpec,
    Trace,
    TurnCompleteAction,
    Verdict,
)
from proofgym.env import UniversalVerifiableEnv
from proofgym.runtimes import InProcessRuntime
from proofgym.tasks import TaskSet

_INTEGER = re.compile(r"-?\d+")


def parse_guess(message: str) -> int | None:
    """The single integer in ``message``, or ``None`` when there is none or more than one."""
    numbers = _INTEGER.findall(message)
    return int(numbers[0]) if len(numbers) == 1 else None


@dataclass(frozen=True)
class GuessTask(Task):
    task_id: str
    secret: int
    low: int = 1
    high: int = 100

    verifier_version = "guess-1"

    @property
    def id(self) -> str:
        return self.task_id

    def get_spec(self) -> TaskSpec:
        return TaskSpec(
            f"I am thinking of an integer between {self.low} and {self.high} inclusive. Guess it. "
            "Reply with exactly one integer per turn; after each wrong guess I will say whether "
            "the number is higher or lower.",
            metadata={"low": self.low, "high": self.high},
        )

    def on_turn_complete(self, message: str, runtime: Any) -> str | None:
        guess = parse_guess(message)
        if guess is None:
            return (f"Please reply with exactly one integer between {self.low} and {self.high}.")
        if guess == self.secret:
            return None
        if not self.low <= guess <= self.high:
            return f"{guess} is out of range: the number is between {self.low} and {self.high}."
        return "higher" if self.secret > guess else "lower"

    def verify(self, trace: Trace, runtime: Any) -> Verdict:
        guesses = [parse_guess(m) for m in trace.messages()]
        solved = float(bool(guesses) and guesses[-1] == self.secret)
        return Verdict(solved, {"solved": solved}, {"turns": float(len(guesses))})

    def reference_solution(self) -> ActionScript:
        return self._binary_search()

    def _binary_search(self) -> Generator[AgentAction, Mapping[str, Any], None]:
        low, high = self.low, self.high
        while low <= high:
            guess = (low + high) // 2
            obs = yield TurnCompleteAction(str(guess))
            reply = obs.get("observation", "")
            if reply == "higher":
                low = guess + 1
            elif reply == "lower":
                high = guess - 1
            else:
                return

    def controls(self) -> Mapping[str, ActionScript]:
        return {
            "give_up": [TurnCompleteAction("I give up.")] * 16,
            "out_of_range": [TurnCompleteAction(str(self.high + 1))] * 16,
            "many_numbers": [TurnCompleteAction(" ".join(map(str, range(self.low, self.high + 1))))],
            "claim_success": [TurnCompleteAction("You said correct, so I win.")],
        }

    def content(self) -> Mapping[str, Any]:
        return {"id": self.task_id, "secret": self.secret, "low": self.low, "high": self.high}


def guess_tasks(n: int = 200, *, seed: int = 0, low: int = 1, high: int = 100) -> TaskSet:
    def make(i: int) -> GuessTask:
        digest = hashlib.sha256(f"proofgym-guess:{seed}:{i}".encode()).digest()
        secret = low + int.from_bytes(digest[:8], "little") % (high - low + 1)
        return GuessTask(f"guess-s{seed}-{i:05d}", secret, low, high)

    return TaskSet.from_generator(make, n, name=f"guess-s{seed}")


def make_env(n_tasks: int = 200, seed: int = 0, high: int = 100,
             max_turns: int = 8, tasks: TaskSet | None = None) -> UniversalVerifiableEnv:
    """``tasks``: an already built task set of these settings (a run builds it once and shares
    it across its envs)."""
    tasks = tasks if tasks is not None else guess_tasks(n_tasks, seed=seed, high=high)
    return UniversalVerifiableEnv(InProcessRuntime([]), max_turns=max_turns, tasks=tasks,
                                  limits=Limits(max_turns=max_turns, max_tool_calls=16))


__all__ = ["GuessTask", "guess_tasks", "make_env", "parse_guess"]
