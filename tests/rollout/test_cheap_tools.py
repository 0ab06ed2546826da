"""Tools declared cheap run on the orchestrator's event loop; others on its runtime threads."""

from __future__ import annotations

import pickle
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from proofgym import (
    InProcessRuntime,
    Orchestrator,
    Task,
    TaskSet,
    TaskSpec,
    Tool,
    ToolCallAction,
    Trace,
    TurnCompleteAction,
    UniversalVerifiableEnv,
    Verdict,
    tool,
)
from proofgym.core import ActionScript
from proofgym.eval import plan_episodes
from proofgym.tools import ToolContext, ToolRegistry
from proofgym.verify.pool import VerifierPool

CALLED_ON: list[int] = []  # the threads the tool and the task's setup ran on


@tool(cheap=True)
def where(ctx: ToolContext) -> str:
    """Name the thread the call runs on."""
    CALLED_ON.append(threading.get_ident())
    return threading.current_thread().name


def echo(text: str) -> str:
    """Return the text."""
    return text


@dataclass(frozen=True)
class WhereTask(Task):
    n: int

    @property
    def id(self) -> str:
        return f"where-{self.n}"

    def get_spec(self) -> TaskSpec:
        return TaskSpec("Call the where tool, then say done.")

    def on_turn_complete(self, message: str, runtime: Any) -> str | None:
        return None

    def verify(self, trace: Trace, runtime: Any) -> Verdict:
        return Verdict(1.0 if trace.tool_calls() else 0.0)

    def setup_runtime(self, runtime: Any) -> None:
        CALLED_ON.append(threading.get_ident())  # env.reset runs where the steps run

    def reference_solution(self) -> ActionScript:
        return [ToolCallAction("where", {}), TurnCompleteAction("done")]

    def content(self) -> Mapping[str, Any]:
        return {"n": self.n}


def run(tool_: Tool) -> tuple[list[int], int]:
    """The threads ``tool_`` and the tasks' setup ran on over 8 episodes, and the loop's thread."""
    import asyncio

    from proofgym.rollout import ReferencePolicy

    tasks = TaskSet([WhereTask(i) for i in range(4)])
    loop_thread: list[int] = []

    async def go() -> list[Any]:
        loop_thread.append(threading.get_ident())
        with VerifierPool("inline") as pool:
            o = Orchestrator(lambda: UniversalVerifiableEnv(InProcessRuntime([tool_], timeout_s=None),
                                                            tasks=tasks),
                             ReferencePolicy(), concurrency=2, verifier=pool)
            return await o.run(plan_episodes(tasks.ids, episodes=8))

    CALLED_ON.clear()
    results = asyncio.run(go())
    assert all(t.reward == 1.0 for t in results), [t.error for t in results]
    assert len(CALLED_ON) == 16
    return list(CALLED_ON), loop_thread[0]


def test_a_cheap_tool_runs_on_the_event_loop_and_another_on_a_runtime_thread() -> None:
    cheap, loop = run(where)
    assert set(cheap) == {loop}
    assert InProcessRuntime([where]).cheap and InProcessRuntime([]).cheap
    plain = Tool(where.fn, name="where")
    assert not plain.cheap and not InProcessRuntime([where, Tool(lambda: 1, name="x",
                                                                 description="x")]).cheap
    threaded, loop = run(plain)
    assert loop not in threaded  # every reset and step on a runtime thread


def test_cheap_survives_pickling_and_schemas_are_fresh_copies() -> None:
    copy = pickle.loads(pickle.dumps(Tool(echo, name="w", cheap=True)))  # rebuilt from echo
    assert copy.cheap and copy.name == "w"
    assert not pickle.loads(pickle.dumps(Tool(echo))).cheap
    registry = ToolRegistry([where])
    first = registry.schemas()
    first[0]["function"]["name"] = "changed"
    first[0]["function"]["parameters"]["properties"]["x"] = {}
    assert registry.schemas() == [where.schema] and where.schema["function"]["name"] == "where"


@pytest.mark.parametrize("cheap", [True, False])
def test_reset_info_tools_are_a_copy_the_caller_may_change(cheap: bool) -> None:
    t = where if cheap else Tool(where.fn, name="where")
    env = UniversalVerifiableEnv(InProcessRuntime([t]), tasks=TaskSet([WhereTask(0)]))
    _, info = env.reset(seed=1)
    info["tools"][0]["function"]["description"] = "changed"
    _, again = env.reset(seed=1)
    assert again["tools"] == [t.schema] == env.current_spec.tools
