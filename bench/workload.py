"""Bench workload: a 3-turn tool-using task, its env, and a scripted model server in its own process.

``LedgerTask``: each of 3 turns asks for the value stored under a key; the agent calls the
``lookup`` tool, then answers. So an episode is 6 model calls. Its grader waits (as a remote test
runner or an LLM judge does) and burns a little CPU, both configurable.
"""

from __future__ import annotations

import asyncio
import hashlib
import multiprocessing as mp
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's proofgym

from proofgym import (
    InProcessRuntime,
    Limits,
    Task,
    TaskSet,
    TaskSpec,
    ToolCallAction,
    ToolError,
    Trace,
    TurnCompleteAction,
    UniversalVerifiableEnv,
    Verdict,
    tool,
)
from proofgym.core import ActionScript
from proofgym.tools import Tool, ToolContext

TURNS = 3
CALLS_PER_EPISODE = 2 * TURNS


@tool(cheap=True)
def lookup(key: str, ctx: ToolContext) -> str:
    """Look up the value stored under a key.

    Args:
        key: The key to look up.
    """
    table = ctx.state.get("table", {})
    if key not in table:
        raise ToolError(f"no key {key!r}", "invalid_arguments")
    return str(table[key])


@dataclass(frozen=True)
class LedgerTask(Task):
    task_id: str
    keys: tuple[str, ...]
    values: tuple[int, ...]
    grade_wait_s: float = 0.0
    grade_cpu_s: float = 0.0

    verifier_version = "ledger-1"

    @property
    def id(self) -> str:
        return self.task_id

    def get_spec(self) -> TaskSpec:
        return TaskSpec(f"[{self.task_id}] Turn 1 of {TURNS}: look up the key {self.keys[0]!r} "
                        "with the lookup tool and reply with its value only.")

    def setup_runtime(self, runtime: Any) -> None:
        runtime.state["table"] = dict(zip(self.keys, self.values, strict=True))
        runtime.state["turn"] = 0

    def on_turn_complete(self, message: str, runtime: Any) -> str | None:
        runtime.state["turn"] += 1
        turn = runtime.state["turn"]
        if turn >= TURNS:
            return None
        return f"Turn {turn + 1} of {TURNS}: now look up {self.keys[turn]!r} and reply with its value."

    def verify(self, trace: Trace, runtime: Any) -> Verdict:
        if self.grade_wait_s:
            time.sleep(self.grade_wait_s)
        if self.grade_cpu_s:
            deadline = time.thread_time() + self.grade_cpu_s
            while time.thread_time() < deadline:
                pass
        answers = trace.messages()
        correct = sum(a.strip() == str(v) for a, v in zip(answers, self.values, strict=False))
        return Verdict(correct / TURNS, {"correct": correct / TURNS})

    def reference_solution(self) -> ActionScript:
        script: list[Any] = []
        for key, value in zip(self.keys, self.values, strict=True):
            script += [ToolCallAction("lookup", {"key": key}), TurnCompleteAction(str(value))]
        return script

    def content(self) -> Mapping[str, Any]:
        return {"id": self.task_id, "keys": self.keys, "values": self.values}


def ledger_tasks(n: int = 200, *, grade_wait_s: float = 0.0, grade_cpu_s: float = 0.0) -> TaskSet:
    def make(i: int) -> LedgerTask:
        digest = hashlib.sha256(f"ledger:{i}".encode()).digest()
        keys = tuple(f"k{i}-{j}" for j in range(TURNS))
        values = tuple(int.from_bytes(digest[4 * j:4 * j + 4], "little") % 10_000 for j in range(TURNS))
        return LedgerTask(f"ledger-{i:04d}", keys, values, grade_wait_s, grade_cpu_s)

    return TaskSet.from_generator(make, n, name="ledger")


def ledger_env(tasks: TaskSet, *, cheap: bool = True) -> UniversalVerifiableEnv:
    """``cheap=False``: the same tool, not declared cheap, so the orchestrator hands every
    ``env.step`` to a runtime thread (how a tool that may block is run)."""
    # timeout_s=None: the lookup tool is trivial, run it inline (no per-call thread hop).
    tool_ = lookup if cheap else Tool(lookup.fn, name="lookup")
    return UniversalVerifiableEnv(InProcessRuntime([tool_], timeout_s=None), max_turns=TURNS,
                                  tasks=tasks, limits=Limits(max_turns=TURNS, max_tool_calls=10))


def answer_directly(task: Any) -> list[TurnCompleteAction]:
    """The peers script: an Arith task answered in one message, no tool call."""
    return [TurnCompleteAction(f"The answer is \\boxed{{{task.answer}}}")]


def _serve(kind: str, n_tasks: int, latency_s: float, ports: Any) -> None:
    from proofgym.testing import ReferenceScript, ScriptedServer

    if kind == "ledger":
        tasks = ledger_tasks(n_tasks)
        script = ReferenceScript(tasks)
    elif kind == "code_repair":  # each task's reference fix, written with the file tools
        from proofgym.envs.code_repair import code_repair_tasks

        script = ReferenceScript(code_repair_tasks())
    else:  # arith answered directly (single turn, no tool): the peers comparison
        from proofgym.envs.arith import arith_tasks

        tasks = arith_tasks(n_tasks)
        script = ReferenceScript(tasks, answer_directly)
    server = ScriptedServer(script, latency_s=latency_s)

    async def main() -> None:
        await server.start_async()
        ports.put(server.port)
        await asyncio.Event().wait()

    asyncio.run(main())


class ServerProcess:
    """The scripted server in its own process (its own core and GIL, like a real model server)."""

    def __init__(self, kind: str, n_tasks: int, latency_s: float) -> None:
        ctx = mp.get_context("spawn")
        self._ports = ctx.Queue()
        self._process = ctx.Process(target=_serve, args=(kind, n_tasks, latency_s, self._ports), daemon=True)

    def __enter__(self) -> str:
        self._process.start()
        port = self._ports.get(timeout=120)
        return f"http://127.0.0.1:{port}/v1"

    def __exit__(self, *exc: object) -> None:
        self._process.terminate()
        self._process.join(timeout=10)

    def cpu_s(self) -> float:
        """CPU seconds the server process has used so far (user + system)."""
        fields = Path(f"/proc/{self._process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb() -> float:
    """Resident memory of this process (from /proc)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")
