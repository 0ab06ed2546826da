"""``proofgym show RUN [TASK|TRAJECTORY]``: read a run's trajectories in a terminal.

Without a selector: one line per episode (its number, task, reward, how it ended). With one: the
episode as a transcript: the prompt, each action (message or tool call with its arguments) and what
came back, then the verdict: reward, components, metrics, failed gates, errors and the reason. A
selector is an episode number from the listing, a trajectory id (or its part after the contract
id), or a task id (every attempt at it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import orjson
import typer


def show_command(
    run: Annotated[Path, typer.Argument(metavar="RUN", help="A run directory (or its trajectories.jsonl).")],
    which: Annotated[str, typer.Argument(
        metavar="[TASK|TRAJECTORY]", help="An episode number from the listing, a trajectory id or a "
                                          "task id (all its attempts). Omitted: list the episodes.")] = "",
    max_chars: Annotated[int, typer.Option(
        min=0, help="Cut each message and observation to this many characters (0: no limit).")] = 2000,
) -> None:
    """List a run's episodes, or print one as a readable transcript with its verdict (plain text:
    a pipe or a pager gets it unchanged)."""
    from proofgym.core import ConfigError
    from proofgym.record.rundir import RunStoreError, load_run

    try:
        loaded = load_run(run)
    except RunStoreError as exc:
        raise ConfigError(str(exc)) from None
    trajectories = loaded.trajectories
    if not which:
        for line in listing(trajectories):
            typer.echo(line)
        return
    chosen = select(trajectories, which)
    if not chosen:
        sample = ", ".join(t.task_id for t in trajectories[:3])
        raise ConfigError(f"{which!r} is no episode number (1-{len(trajectories)}), trajectory id or task "
                          f"id of {loaded.path}; `proofgym show {run}` lists them (tasks: {sample}, ...)")
    for i, traj in enumerate(chosen):
        if i:
            typer.echo("")
        typer.echo(transcript(traj, max_chars=max_chars))


def select(trajectories: list[Any], which: str) -> list[Any]:
    """The episodes ``which`` names (see the module docstring)."""
    if which.isdigit() and 1 <= int(which) <= len(trajectories):
        return [trajectories[int(which) - 1]]
    by_id = [t for t in trajectories if which in (t.trajectory_id, t.trajectory_id.partition("/")[2])]
    return by_id or [t for t in trajectories if t.task_id == which]


def end_reason(traj: Any) -> str:
    if traj.status == "error":
        return "error"
    if traj.truncated:
        return f"truncated:{traj.truncation_reason or '?'}"
    return "terminated" if traj.terminated else "unfinished"


def listing(trajectories: list[Any]) -> list[str]:
    lines = [f"{'#':>4}  {'reward':>6}  {'steps':>5}  {'end':<18} {'split':<8} task  (trajectory id)"]
    for i, t in enumerate(trajectories, 1):
        reward = "—" if t.reward is None else f"{t.reward:.3f}"
        lines.append(f"{i:>4}  {reward:>6}  {len(t.steps):>5}  {end_reason(t):<18} {t.split or '—':<8} "
                     f"{t.task_id}  ({t.trajectory_id})")
    return lines


def _cut(text: str, max_chars: int) -> str:
    if max_chars and len(text) > max_chars:
        return text[:max_chars] + f"\n… [{len(text) - max_chars} more characters; --max-chars 0 shows all]"
    return text


def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line for line in (text.splitlines() or [""]))


def _observation_text(observation: Any) -> tuple[str, str]:
    if isinstance(observation, dict):
        kind = str(observation.get("type") or "observation")
        body = observation.get("observation")
        text = body if isinstance(body, str) else orjson.dumps(body, default=repr).decode()
        return kind, text
    return "observation", str(observation)


def transcript(traj: Any, *, max_chars: int = 2000) -> str:
    """One episode as plain text: header, prompt, steps, verdict."""
    from proofgym.core import ToolCallAction

    policy = traj.policy or {}
    who = policy.get("model") or policy.get("name") or "?"
    out = [f"=== {traj.trajectory_id}",
           f"env {traj.env_id} · task {traj.task_id} · split {traj.split or '—'} · seed {traj.seed} · "
           f"policy {who} (version {policy.get('version', '?')})",
           f"status {traj.status} · ended {end_reason(traj)} · {len(traj.steps)} steps"
           + (f" · reward {traj.reward:.4g}" if traj.reward is not None else " · unscored"),
           "", "[prompt]", _indent(_cut(traj.prompt or "", max_chars))]
    for n, step in enumerate(traj.steps, 1):
        action = step.action
        if isinstance(action, ToolCallAction):
            args = orjson.dumps(action.tool_input, default=repr).decode()
            out += ["", f"[{n}] tool call {action.tool_name}({_cut(args, max_chars)})"]
        else:
            out += ["", f"[{n}] message", _indent(_cut(getattr(action, "message", "") or "", max_chars))]
        kind, text = _observation_text(step.observation)
        error = (step.info or {}).get("error_kind")
        if text or error:
            out.append(f"    -> {kind}" + (f" (error: {error})" if error else ""))
            if text:
                out.append(_indent(_cut(text, max_chars), "       "))
    out += ["", "[verdict]"]
    verdict = traj.verdict
    if traj.error:
        out.append(f"    episode error: {_cut(traj.error, max_chars)}")
    if verdict is None:
        out.append("    none")
        return "\n".join(out)
    out.append(f"    {verdict.status} · reward {verdict.reward:.4g} · grader {verdict.grader or '?'}")
    for label, values in (("components", verdict.components), ("metrics", verdict.metrics)):
        if values:
            out.append(f"    {label}: " + ", ".join(f"{k}={v:.4g}" for k, v in values.items()))
    if verdict.failed_gates:
        out.append(f"    failed gates: {', '.join(verdict.failed_gates)}")
    for part, why in (verdict.errors or {}).items():
        out.append(f"    error in {part}: {why}")
    if verdict.error:
        out.append(f"    grader error: {_cut(verdict.error, max_chars)}")
    if verdict.reason:
        out += ["    reason:", _indent(_cut(verdict.reason, max_chars), "      ")]
    return "\n".join(out)
