"""The TRL reward function grades completions with the task's grader and never fakes a zero."""

from __future__ import annotations

import gymnasium
import pytest

from proofgym import InProcessRuntime, Task, TaskSet, TaskSpec, UniversalVerifiableEnv
from proofgym.integrations.trl import ProofgymReward, prompt_dataset


def test_prompt_dataset_and_rewards_on_arith():
    env = gymnasium.make("proofgym/Arith-v0", n_tasks=6).unwrapped
    rows = prompt_dataset(env, system_prompt="Be brief.", allow_heldout=True)  # all 6 tasks
    assert len(rows) == 6
    assert rows[0]["prompt"][0] == {"role": "system", "content": "Be brief."}
    assert rows[0]["prompt"][1]["content"] == env.tasks[0].get_spec().prompt
    reward = ProofgymReward(env, allow_heldout=True)
    tasks = list(env.tasks)
    completions = [f"\\boxed{{{t.answer}}}" for t in tasks[:3]]
    completions += [f"\\boxed{{{t.wrong_answer}}}" for t in tasks[3:]]
    ids = [r["task_id"] for r in rows]
    assert reward(prompts=None, completions=completions, task_id=ids) == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    conversational = [[{"role": "assistant", "content": c}] for c in completions]
    assert reward(completions=conversational, task_id=ids)[:4] == [1.0, 1.0, 1.0, 0.0]
    assert reward.__name__ == "proofgym_reward"


class _Flaky(Task):
    def __init__(self, tid):
        self.tid = tid

    @property
    def id(self):
        return self.tid

    def get_spec(self):
        return TaskSpec("say ok")

    def verify(self, trace, runtime):
        if self.tid == "broken":
            raise RuntimeError("answer key missing")
        return float(trace.final_message() == "ok")


def test_grader_errors_are_none_not_zero_and_mismatched_columns_fail():
    env = UniversalVerifiableEnv(InProcessRuntime([]), max_turns=1,
                                 tasks=TaskSet([_Flaky("fine"), _Flaky("broken")]))
    seen = []
    reward = ProofgymReward(env, allow_heldout=True,
                            on_verdict=lambda tid, c, v: seen.append((tid, v.status)))
    assert reward(completions=["ok", "ok", "no"], task_id=["fine", "broken", "fine"]) == [1.0, None, 0.0]
    assert seen == [("fine", "scored"), ("broken", "error"), ("fine", "scored")]
    assert "answer key missing" in reward.last_verdicts[1].error
    with pytest.raises(ValueError, match="task_id"):
        reward(completions=["ok"], task_id=[])


def test_multi_turn_tasks_are_refused_with_a_clear_error():
    env = gymnasium.make("proofgym/Guess-v0", n_tasks=2).unwrapped
    with pytest.raises(ValueError, match="multi-turn"):
        ProofgymReward(env)(completions=["1"], task_id=[env.tasks.ids[0]])


# --------------------------------------------------------------- environment_factory & co.
import copy  # noqa: E402
import inspect  # noqa: E402
import multiprocessing as mp  # noqa: E402
import pickle  # noqa: E402
from typing import Any  # noqa: E402

import cloudpickle  # noqa: E402

from proofgym.core import ToolCallAction, TurnCompleteAction  # noqa: E402
from proofgym.envs import BUNDLED  # noqa: E402
from proofgym.envs.arith import calculator  # noqa: E402
from proofgym.integrations.trl import (  # noqa: E402
    EnvironmentReward,
    MultiTurnNotSupported,
    dataset,
    environment_factory,
    trl_view,
)
from proofgym.tasks import HeldOutError  # noqa: E402
from tests.conftest import require_tool  # noqa: E402
from tests.trl_fixtures import require_module  # noqa: E402


def test_adapter_tool_schemas_equal_the_env_tools_for_every_bundled_env():
    get_json_schema = require_module("transformers.utils").get_json_schema
    checked = []
    for env_id in BUNDLED:
        if env_id in ("proofgym/CodeRepair-v0", "proofgym/RepoRepair-v0"):
            require_tool("bwrap")
        env = gymnasium.make(env_id).unwrapped
        try:
            task_id = env.tasks.ids[0]
            _, info = env.reset(options={"task_id": task_id})
            spec_tools = info["tools"]
            if env_id == "proofgym/Guess-v0":  # multi-turn: refused at construction, said why
                with pytest.raises(MultiTurnNotSupported, match="proofgym export"):
                    environment_factory(env_id)
                continue
            cls = environment_factory(env_id)
            methods = [m for m, _ in inspect.getmembers(cls, predicate=inspect.isfunction)
                       if not m.startswith("_") and m != "reset"]
            assert sorted(methods) == sorted(t["function"]["name"] for t in spec_tools)
            for schema in spec_tools:
                derived = get_json_schema(getattr(cls, schema["function"]["name"]))
                assert derived == trl_view(schema)
                assert derived["function"]["description"] == schema["function"]["description"]
            checked.append(env_id)
        finally:
            env.close()
    assert checked == ["proofgym/Arith-v0", "proofgym/CodeRepair-v0", "proofgym/SearchQA-v0",
                       "proofgym/RepoRepair-v0"]


def test_dataset_rows_are_the_spec_prompts_and_held_out_tasks_are_refused():
    env = gymnasium.make("proofgym/Arith-v0", n_tasks=40).unwrapped
    rows = dataset(env, system_prompt="Be brief.")
    manifest = env.tasks.manifest
    assert [r["task_id"] for r in rows] == manifest.pool("train")
    prompt = env.tasks.get(rows[0]["task_id"]).get_spec().prompt
    assert rows[0]["prompt"] == [{"role": "system", "content": "Be brief."},
                                 {"role": "user", "content": prompt}]
    with pytest.raises(HeldOutError, match="heldout"):
        dataset(env, "heldout")
    held = dataset(env, "heldout", allow_heldout=True)
    assert {r["task_id"] for r in held} == set(manifest.pool("heldout")) and held
    # the adapter's reset refuses a held-out row too, unless the class was built to allow it
    instance = environment_factory("proofgym/Arith-v0", n_tasks=40)()
    try:
        with pytest.raises(HeldOutError):
            instance.reset(**held[0])
        with pytest.raises(ValueError, match="task_id"):
            instance.reset(prompt=held[0]["prompt"])
        assert instance.reset(task_id=rows[0]["task_id"]) == rows[0]["prompt"][-1]["content"]
        assert instance.reset(**rows[0]) is None  # the row already shows the prompt
    finally:
        instance._close()
    allowed = environment_factory("proofgym/Arith-v0", n_tasks=40, allow_heldout=True)()
    try:
        assert allowed.reset(**held[0]) is None
    finally:
        allowed._close()


def test_proofgym_reward_refuses_a_multi_turn_env_at_construction():
    env = gymnasium.make("proofgym/Guess-v0", n_tasks=2).unwrapped
    with pytest.raises(MultiTurnNotSupported, match="multi-turn"):
        ProofgymReward(env)


def _run_in_child(payload: bytes, results: Any) -> None:
    """In a spawned process (as TRL's async trainer runs rollouts): unpickle the adapter class
    and the reward function, play one episode per completion and grade the batch."""
    results.put(_child_episode(payload))


def _child_episode(payload: bytes) -> list:
    cls, reward, rows = pickle.loads(payload)
    envs = [cls(), cls()]
    try:
        for env, row in zip(envs, rows, strict=True):
            env.reset(**row)
        observation = envs[0].calculator(expression="6*7")
        completions = [[{"role": "assistant", "content": "\\boxed{42}"}],
                       [{"role": "assistant", "content": "no idea"}]]
        return [observation, reward(completions=completions, environments=envs)]
    finally:
        for env in envs:
            env._close()
        reward.close()


def test_adapter_class_and_reward_function_run_in_a_spawned_process():
    cls = environment_factory("proofgym/Arith-v0", n_tasks=20)
    reward = EnvironmentReward(processes=1)
    env = gymnasium.make("proofgym/Arith-v0", n_tasks=20).unwrapped
    rows = dataset(env)[:2]
    payload = pickle.dumps((cls, reward, rows))
    assert pickle.loads(pickle.dumps(cls)) is cls  # by reference: the same class here
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    child = ctx.Process(target=_run_in_child, args=(payload, results))
    child.start()
    observation, rewards = results.get(timeout=300)
    child.join(timeout=60)
    assert child.exitcode == 0
    assert observation == "42"
    task = env.tasks.get(rows[0]["task_id"])
    expected = 1.0 if task.answer == "42" else 0.0
    assert rewards == [expected, 0.0]


def test_adapter_routes_bad_calls_through_the_env_and_reports_the_episode_end():
    cls = environment_factory("proofgym/Arith-v0", n_tasks=6, max_tool_calls=1)
    instance = cls()
    try:
        row = dataset(instance.env)[0]
        instance.reset(**row)
        assert "invalid arguments" in instance.calculator(expr="1")  # the env's error observation
        assert "budget" in instance.calculator(expression="1")  # truncated: tool_calls
        assert "episode has ended" in instance.calculator(expression="1")
        types = [s.observation["type"] for s in instance.trace_steps]
        assert types == ["tool_error", "episode_end"]
        assert instance._finish("\\boxed{1}").trace.final_message() is None  # ended before answering
    finally:
        instance._close()


def test_tool_is_a_plain_callable_for_frameworks():
    get_json_schema = require_module("transformers.utils").get_json_schema
    assert calculator.__name__ == "calculator"
    assert "Args:\n    expression:" in calculator.__doc__
    assert list(inspect.signature(calculator).parameters) == ["expression"]
    function = calculator.as_function()
    assert inspect.isfunction(function) and function(expression="2*3") == "6"
    assert get_json_schema(function) == trl_view(calculator.schema)
    with pytest.raises(Exception, match="invalid arguments"):
        function(expr="1")


def test_envs_pickle_and_deep_copy_before_and_between_episodes():
    env = gymnasium.make("proofgym/Arith-v0", n_tasks=4).unwrapped
    copies = [pickle.loads(pickle.dumps(env)), copy.deepcopy(env), cloudpickle.loads(cloudpickle.dumps(env))]
    assert all(c.tasks.ids == env.tasks.ids for c in copies)
    env.reset(options={"task_id": env.tasks.ids[0]})
    env.step(ToolCallAction("calculator", {"expression": "1+1"}))  # starts the runtime's worker
    for clone in (pickle.loads(pickle.dumps(env)), copy.deepcopy(env),
                  cloudpickle.loads(cloudpickle.dumps(env))):
        obs, *_ = clone.step(ToolCallAction("calculator", {"expression": "2+2"}))
        assert obs["observation"] == "4"
        clone.close()


def test_render_mode_none_and_ansi_transcript():
    assert gymnasium.make("proofgym/Arith-v0").unwrapped.render_mode is None
    env = gymnasium.make("proofgym/Arith-v0", n_tasks=3, render_mode="ansi")
    env.reset(options={"task_id": env.unwrapped.tasks.ids[0]})
    env.step(ToolCallAction("calculator", {"expression": "1+1"}))
    env.step(TurnCompleteAction("\\boxed{2}"))
    text = env.render()
    assert ("call calculator({'expression': '1+1'})\ntool_output: 2\n"
            "assistant: \\boxed{2}\n[episode ended]") in text
    with pytest.raises(ValueError, match="render_mode='human' is not supported"):
        gymnasium.make("proofgym/Arith-v0", render_mode="human")


def test_gate_masks_other_reward_functions_where_the_grader_failed_and_instances_pickle_fresh():
    from tests.trl_fixtures import CRASH_MARKER, crashing_arith_env

    cls = environment_factory(crashing_arith_env, n_tasks=8)
    envs = [cls(), cls()]
    reward = EnvironmentReward(backend="inline")
    try:
        rows = dataset(envs[0].env)[:2]
        for env, row in zip(envs, rows, strict=True):
            env.reset(**row)
        completions = [[{"role": "assistant", "content": "\\boxed{1}"}],
                       [{"role": "assistant", "content": f"{CRASH_MARKER} \\boxed{{1}}"}]]
        logged: dict[str, list] = {}
        rewards = reward(completions=completions, environments=envs,
                         log_metric=lambda k, v: logged.setdefault(k, []).append(v),
                         log_extra=lambda k, v: logged.setdefault(k, []).append(v))
        assert rewards[1] is None and rewards[0] in (0.0, 1.0)
        assert logged["proofgym/grader_error_rate"] == [0.5]
        assert logged["proofgym_status"] == [["scored", "error"]]

        def length_bonus(completions, **_):
            return [0.1 for _ in completions]

        gated = reward.gate(length_bonus)
        assert gated.__name__ == "length_bonus"
        assert gated(completions=completions) == [0.1, None]
        # a pickled instance is a fresh one of the same class: no episode, its own env
        clone = pickle.loads(pickle.dumps(envs[0]))
        assert type(clone) is cls and clone.episode_id is None and clone.env is not envs[0].env
        clone._close()
    finally:
        reward.close()
        for env in envs:
            env._close()


def test_a_tool_that_is_not_a_module_global_pickles_with_its_function():
    from proofgym.tools import Tool

    wrapped = Tool(evaluate_expression, name="evaluate")
    clone = pickle.loads(pickle.dumps(wrapped))
    assert clone.name == "evaluate" and clone.schema == wrapped.schema
    assert clone.invoke({"expression": "1/2 + 1/2"}).output == "1"


def evaluate_expression(expression: str) -> str:
    """Evaluate an expression exactly.

    Args:
        expression: Arithmetic, for example "1 + 2".
    """
    from proofgym.envs.arith.calculator import evaluate

    return str(evaluate(expression))


# --------------------------------------------------- graders that hang or kill their process
import gc  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

from tests.conftest import REPO  # noqa: E402
from tests.faulty_graders import FAULTS, make_every_fault_env  # noqa: E402

_faulty_env = make_every_fault_env


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][0] != "Z"  # a zombie has exited
    except FileNotFoundError:
        return False


def test_proofgym_reward_grades_in_a_pool_and_hang_segfault_exit_are_none():
    reward = ProofgymReward(_faulty_env(), processes=2, timeout_s=3.0, allow_heldout=True)
    try:
        started = time.monotonic()
        ids = [f"faulty-{f}" for f in FAULTS]
        assert reward(completions=["yes"] * len(ids), task_id=ids) == [1.0, None, None, None]
        assert time.monotonic() - started < 120
        errors = dict(zip(FAULTS, (v.error for v in reward.last_verdicts), strict=True))
        assert "did not finish within the 3 s timeout" in errors["hang"]
        assert "SIGSEGV" in errors["segfault"] and "exit code 1" in errors["exit"]
        # the pool survived its dead workers: the next batch is graded
        assert reward(completions=["yes", "no"], task_id=["faulty-ok"] * 2) == [1.0, 0.0]
    finally:
        reward.close()


def test_environment_reward_hang_segfault_exit_are_none():
    cls = environment_factory(make_every_fault_env, allow_heldout=True)
    envs = [cls() for _ in FAULTS]
    reward = EnvironmentReward(processes=2, timeout_s=3.0)
    try:
        for env, fault in zip(envs, FAULTS, strict=True):
            env.reset(task_id=f"faulty-{fault}")
        started = time.monotonic()
        completions = [[{"role": "assistant", "content": "yes"}]] * len(envs)
        assert reward(completions=completions, environments=envs) == [1.0, None, None, None]
        assert time.monotonic() - started < 120
        errors = dict(zip(FAULTS, (v.error for v in reward.last_verdicts), strict=True))
        assert "did not finish within the 3 s timeout" in errors["hang"]
        assert "SIGSEGV" in errors["segfault"] and "exit code 1" in errors["exit"]
    finally:
        reward.close()
        for env in envs:
            env._close()


def test_proofgym_reward_workers_go_when_it_is_collected_or_the_interpreter_exits():
    reward = ProofgymReward(_faulty_env(), processes=1, timeout_s=30.0, allow_heldout=True)
    assert reward(completions=["yes"], task_id=["faulty-ok"]) == [1.0]
    pool = reward.pool
    pids = [w.process.pid for w in pool._backend._workers]
    assert pids and all(_alive(p) for p in pids)
    del reward
    gc.collect()
    assert pool.closed
    deadline = time.monotonic() + 15
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(p) for p in pids), "a grader worker outlived its reward function"

    # a script that never closes its reward function (as TRL recipes do)
    script = (
        "from proofgym import InProcessRuntime, TaskSet, UniversalVerifiableEnv\n"
        "from proofgym.integrations.trl import ProofgymReward\n"
        "from tests.faulty_graders import FaultyTask\n"
        "if __name__ == '__main__':\n"
        "    env = UniversalVerifiableEnv(InProcessRuntime([]), max_turns=1,\n"
        "                                 tasks=TaskSet([FaultyTask('ok')]))\n"
        "    reward = ProofgymReward(env, processes=1, allow_heldout=True)\n"
        "    assert reward(completions=['yes'], task_id=['faulty-ok']) == [1.0]\n"
        "    print(*[w.process.pid for w in reward.pool._backend._workers], flush=True)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    pids = [int(p) for p in proc.stdout.split()]
    assert pids
    deadline = time.monotonic() + 5
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(p) for p in pids), "a grader worker outlived the script"


def test_proofgym_reward_pickles_without_its_pool():
    reward = ProofgymReward(_faulty_env(), backend="inline", timeout_s=5.0, allow_heldout=True)
    try:
        assert reward(completions=["yes"], task_id=["faulty-ok"]) == [1.0]
        clone = pickle.loads(pickle.dumps(reward))
        assert clone.pool is not reward.pool and clone.pool.backend == "inline"
        assert clone(completions=["no"], task_id=["faulty-ok"]) == [0.0]
        clone.close()
    finally:
        reward.close()
