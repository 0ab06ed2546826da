"""Run one episode: policy and env alternate, then the trace is graded."""

from __future__ import annotations

import time
from typing import Any

from proofgym.core import AgentAction, Task, TraceStep, Verdict, describe_exception
from proofgym.env import UniversalVerifiableEnv
from proofgym.record import StepRecord, Trajectory
from proofgym.rollout.policies import Policy

#: Hard stop for a runaway loop (a policy that never ends its turn in an env without budgets).
MAX_STEPS = 10_000


def record_step(traj: Trajectory, trace: list[TraceStep], action: AgentAction, obs: dict[str, Any],
                terminated: bool, truncated: bool, info: dict[str, Any], policy_s: float,
                env_s: float, usage: dict[str, Any] | None = None) -> bool:
    """Append one step to the trajectory and the grader's trace; True when the episode ended.

    Shared by the synchronous loop and the orchestrator so both record episodes identically.
    """
    traj.steps.append(StepRecord(action, obs, info, policy_s, env_s, usage or {}))
    trace.append(TraceStep(action, obs))
    if terminated or truncated:
        traj.terminated, traj.truncated = bool(terminated), bool(truncated)
        traj.truncation_reason = info.get("truncation_reason")
        return True
    return False


def run_episode(env: UniversalVerifiableEnv, policy: Policy, *, task: Task | None = None,
                task_id: str | None = None, seed: int | None = None,
                trajectory_id: str | None = None, env_id: str = "", verify: bool = True) -> Trajectory:
    """Run one episode of ``policy`` in ``env`` and return its trajectory.

    A failure of the policy, the runtime or the task's dialogue logic does not escape: the
    trajectory gets ``status="error"`` with the reason and an ``unscored`` verdict. Grader failures
    are ``status="error"`` *verdicts* on an otherwise complete trajectory.
    """
    options: dict[str, Any] = {}
    if task is not None:
        options["task"] = task
    elif task_id is not None:
        options["task_id"] = task_id
    started = time.perf_counter()
    obs, info = env.reset(seed=seed, options=options)
    current = env.current_task
    assert current is not None and env.current_spec is not None
    traj = Trajectory(
        trajectory_id=trajectory_id or f"{current.id}/{seed}",
        env_id=env_id, task_id=current.id, task_hash=current.content_hash, seed=seed,
        policy=policy.describe(), prompt=env.current_spec.prompt, tools=info["tools"],
    )
    steps: list[TraceStep] = []
    policy_s = env_s = 0.0
    try:
        policy.start(current, obs, info, env.action_space)
        for _ in range(MAX_STEPS):
            t0 = time.perf_counter()
            action = policy.act(obs)
            t1 = time.perf_counter()
            obs, _reward, terminated, truncated, info = env.step(action)
            t2 = time.perf_counter()
            policy_s += t1 - t0
            env_s += t2 - t1
            if record_step(traj, steps, action, obs, terminated, truncated, info, t1 - t0, t2 - t1):
                break
        else:
            raise RuntimeError(f"episode exceeded {MAX_STEPS} steps without ending; set Limits")
    except Exception as exc:  # recorded on the trajectory: one bad episode must not end a run
        traj.status, traj.error = "error", describe_exception(exc)
        traj.verdict = Verdict.unscored(f"episode failed: {traj.error}")
    verify_s = 0.0
    if traj.status == "ok" and verify:
        t3 = time.perf_counter()
        job = env.verification_job(steps)
        traj.verdict = job.run()
        traj.artifact = job.artifact.to_dict()  # kept so the run can be re-graded later
        verify_s = time.perf_counter() - t3
    traj.timings = {"policy_s": policy_s, "env_s": env_s, "verify_s": verify_s,
                    "total_s": time.perf_counter() - started}
    return traj
