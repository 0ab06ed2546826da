"""Turning runs into training data: chat-format SFT records and preference pairs.

Messages follow the OpenAI chat format: an optional ``system`` message, the ``user`` prompt, one
``assistant`` message per tool call (``tool_calls``: id, ``type: "function"``, name and the
arguments as a JSON string) answered by a ``tool`` message with its ``tool_call_id``, an
``assistant`` message for each turn-ending message, and a ``user`` message for each reply of a
multi-turn task. Preference pairs use TRL's conversational format: a shared ``prompt`` and the
``chosen`` and ``rejected`` continuations.

Only complete, scored episodes are exported: a trajectory with ``status="error"`` or a verdict
that is not ``scored`` (grader error, unscored) never becomes training data. Episodes of held-out
tasks are left out too unless asked for: training on them would spend the held-out set.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import orjson

from proofgym.core import ToolCallAction, TurnCompleteAction
from proofgym.core.errors import ConfigError
from proofgym.eval.metrics import attempts_by_task
from proofgym.record import Trajectory
from proofgym.record.rundir import contract_id_of, split_of

FORMATS = ("sft", "preferences", "rl")

#: Splits whose episodes are not exported unless the caller includes them explicitly.
PROTECTED_SPLITS = frozenset({"heldout"})


def exportable(traj: Trajectory, *, include_heldout: bool = False) -> bool:
    """A finished episode with a scored verdict (the only kind that may become training data),
    not of a held-out task unless ``include_heldout``."""
    if not include_heldout and split_of(traj) in PROTECTED_SPLITS:
        return False
    return traj.status == "ok" and traj.reward is not None


def system_prompt_of(traj: Trajectory) -> str | None:
    """The system prompt the policy ran with, when the record carries one."""
    for source in (traj.policy, traj.extra):
        value = source.get("system_prompt") if isinstance(source, dict) else None
        if isinstance(value, str) and value:
            return value
    return None


def _arguments(tool_input: Any) -> str:
    # A string is what the model emitted (possibly malformed JSON): kept verbatim, as sent.
    if isinstance(tool_input, str):
        return tool_input
    return orjson.dumps(tool_input, default=repr).decode()


def chat_messages(traj: Trajectory, *, system: str | None = None) -> list[dict[str, Any]]:
    """The episode as OpenAI chat messages (see the module docstring).

    Tool calls that came from one model reply (the later ones are recorded with
    ``usage["from_previous_call"]``) share one assistant message, followed by their tool messages
    in order, exactly as the model saw them.
    """
    system = system if system is not None else system_prompt_of(traj)
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": traj.prompt})
    pending_results: list[dict[str, Any]] = []  # tool messages of the current assistant message

    def flush() -> None:
        messages.extend(pending_results)
        pending_results.clear()

    for i, step in enumerate(traj.steps):
        action, obs = step.action, step.observation
        text = str(obs.get("observation", ""))
        if isinstance(action, ToolCallAction):
            call_id = action.call_id or f"call_{i}"
            call = {"id": call_id, "type": "function",
                    "function": {"name": action.tool_name, "arguments": _arguments(action.tool_input)}}
            same_reply = bool(step.usage.get("from_previous_call")) and pending_results
            if same_reply:
                messages[-1]["tool_calls"].append(call)
            else:
                flush()
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
            pending_results.append({"role": "tool", "tool_call_id": call_id, "content": text})
        elif isinstance(action, TurnCompleteAction):
            flush()
            messages.append({"role": "assistant", "content": action.message})
            if obs.get("type") == "turn_transition":
                messages.append({"role": "user", "content": text})
    flush()
    return messages


def _provenance(traj: Trajectory) -> dict[str, Any]:
    return {"trajectory_id": traj.trajectory_id, "contract_id": contract_id_of(traj),
            "env_id": traj.env_id, "task_id": traj.task_id, "task_hash": traj.task_hash,
            "split": split_of(traj),
            "reward": traj.reward, "policy": traj.policy}


def sft_records(trajectories: Iterable[Trajectory], *, min_reward: float | None = 1.0,
                system: str | None = None, include_heldout: bool = False) -> Iterator[dict[str, Any]]:
    """One record per exportable trajectory whose reward is at least ``min_reward``:
    ``{"messages", "tools", "trajectory_id", "contract_id", ...}``."""
    for traj in trajectories:
        if not exportable(traj, include_heldout=include_heldout):
            continue
        if min_reward is not None and traj.reward < min_reward:  # type: ignore[operator]
            continue
        yield {"messages": chat_messages(traj, system=system), "tools": traj.tools, **_provenance(traj)}


def preference_pairs(trajectories: Iterable[Trajectory], *, min_reward: float | None = None,
                     system: str | None = None, include_heldout: bool = False,
                     ) -> Iterator[dict[str, Any]]:
    """Pairs of a better and a worse attempt at the same task (TRL conversational preference
    format). Per task the attempts are ranked by reward; the best is paired with the worst, the
    second best with the second worst, and so on, while the better one scores strictly higher (and
    at least ``min_reward``). Each attempt is used at most once."""
    for task_id, group in attempts_by_task(trajectories).items():
        ranked: Sequence[Trajectory] = sorted(
            (t for t in group if exportable(t, include_heldout=include_heldout)),
            key=lambda t: -t.reward)  # type: ignore[operator]
        i, j = 0, len(ranked) - 1
        while i < j:
            better, worse = ranked[i], ranked[j]
            if better.reward <= worse.reward or (min_reward is not None and better.reward < min_reward):  # type: ignore[operator]
                break
            if better.prompt == worse.prompt and better.task_hash == worse.task_hash:
                yield _pair(task_id, better, worse, system)
            i, j = i + 1, j - 1


def _pair(task_id: str, better: Trajectory, worse: Trajectory, system: str | None) -> dict[str, Any]:
    chosen, rejected = chat_messages(better, system=system), chat_messages(worse, system=system)
    shared = 0
    while shared < min(len(chosen), len(rejected)) and chosen[shared]["role"] in ("system", "user") \
            and chosen[shared] == rejected[shared]:
        shared += 1
    return {
        "prompt": chosen[:shared], "chosen": chosen[shared:], "rejected": rejected[shared:],
        "tools": better.tools, "task_id": task_id, "env_id": better.env_id, "task_hash": better.task_hash,
        "contract_id": contract_id_of(better), "split": split_of(better),
        "chosen_trajectory_id": better.trajectory_id, "rejected_trajectory_id": worse.trajectory_id,
        "chosen_reward": better.reward, "rejected_reward": worse.reward,
    }


def export_records(trajectories: Iterable[Trajectory], fmt: str, *, min_reward: float | None = None,
                   system: str | None = None, include_heldout: bool = False,
                   current_version: int | None = None, max_off_policy_steps: int | None = None,
                   ) -> Iterator[dict[str, Any]]:
    """``sft`` records (``min_reward`` defaults to 1.0), ``preferences`` pairs, or token-exact
    ``rl`` records (:mod:`proofgym.eval.export_rl`)."""
    if fmt == "rl":
        from proofgym.eval.export_rl import rl_records

        return rl_records(trajectories, exportable=exportable, provenance=_provenance,
                          current_version=current_version, max_off_policy_steps=max_off_policy_steps,
                          include_heldout=include_heldout)
    if fmt == "sft":
        return sft_records(trajectories, min_reward=1.0 if min_reward is None else min_reward,
                           system=system, include_heldout=include_heldout)
    if fmt == "preferences":
        return preference_pairs(trajectories, min_reward=min_reward, system=system,
                                include_heldout=include_heldout)
    raise ConfigError(f"unknown export format {fmt!r}; use one of {', '.join(FORMATS)}")


def write_jsonl(records: Iterable[dict[str, Any]], path: Any) -> int:
    """Write records one JSON object per line; returns how many."""
    count = 0
    with open(path, "wb") as f:
        for record in records:
            f.write(orjson.dumps(record, default=repr) + b"\n")
            count += 1
    return count
