"""``proofgym export``: a run's trajectories as training data (chat JSONL)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated, Optional

import typer

from proofgym.cli.console import console
from proofgym.cli.numbers import number


def export_command(
    run: Annotated[Path, typer.Argument(metavar="RUN", help="A run directory (or its trajectories.jsonl).")],
    fmt: Annotated[str, typer.Option("--format", "-f", help="sft | preferences | rl (token ids, "
                                     "log-probabilities, loss mask, reward, policy version)")] = "sft",
    min_reward: Annotated[Optional[float], typer.Option(  # noqa: UP045 - typer
        "--min-reward", parser=number(),
        help="sft: export trajectories with at least this reward (default 1.0); "
                             "preferences: the chosen attempt must reach it.")] = None,
    out: Annotated[Optional[Path], typer.Option(  # noqa: UP045 - typer
        "--out", "-o", help="File to write (default: RUN/export-FORMAT.jsonl).")] = None,
    system: Annotated[Optional[str], typer.Option(  # noqa: UP045 - typer
        help="System prompt to put first (default: the one the run's policy recorded, if any).")] = None,
    include_heldout: Annotated[bool, typer.Option(
        "--include-heldout",
        help="Also export episodes of held-out tasks (training on them spends the held-out set).")] = False,
    current_version: Annotated[Optional[int], typer.Option(  # noqa: UP045 - typer
        help="rl: the trainer's current policy version (a step): each record's age is this minus "
             "its policy version (default with --max-off-policy-steps: the run's newest).")] = None,
    max_off_policy_steps: Annotated[Optional[int], typer.Option(  # noqa: UP045 - typer
        min=0, help="rl: leave out episodes more than this many versions old (prime-rl: 8).")] = None,
) -> None:
    """Export chat-format JSONL: SFT records above a reward threshold, or preference pairs."""
    from proofgym.eval.export import FORMATS, export_records, exportable, write_jsonl
    from proofgym.record.rundir import RunStoreError, load_run

    if fmt not in FORMATS:
        raise typer.BadParameter(f"unknown format {fmt!r}; use one of: {', '.join(FORMATS)}",
                                 param_hint="--format")
    try:
        loaded = load_run(run)
    except RunStoreError as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2) from None
    target = out or loaded.path / f"export-{fmt}.jsonl"
    if not target.parent.is_dir():
        from proofgym.core import ConfigError

        raise ConfigError(f"cannot write {target}: the directory {target.parent} does not exist; "
                          "create it or choose another --out")
    if fmt != "rl" and (current_version is not None or max_off_policy_steps is not None):
        raise typer.BadParameter("--current-version and --max-off-policy-steps are for --format rl",
                                 param_hint="--format")
    records = export_records(loaded.trajectories, fmt, min_reward=min_reward, system=system,
                             include_heldout=include_heldout, current_version=current_version,
                             max_off_policy_steps=max_off_policy_steps)
    count = write_jsonl(records, target)
    left_out = Counter(_why_not(t) for t in loaded.trajectories
                       if not exportable(t, include_heldout=include_heldout))
    what = {"sft": "records", "preferences": "preference pairs", "rl": "token-level RL records"}[fmt]
    console.print(f"wrote {count} {what} from {len(loaded.trajectories)} trajectories to {target}")
    if left_out:
        reasons = ", ".join(f"{n} with {why}" for why, n in sorted(left_out.items()))
        console.print(f"never exported: {reasons}")
    if fmt == "sft":
        threshold = 1.0 if min_reward is None else min_reward
        below = sum(1 for t in loaded.trajectories if exportable(t, include_heldout=include_heldout)
                    and t.reward is not None and t.reward < threshold)
        if below:
            console.print(f"left out: {below} scored below --min-reward {threshold:g}", highlight=False)


def _why_not(traj) -> str:
    from proofgym.record.rundir import split_of

    if split_of(traj) == "heldout" and traj.status == "ok" and traj.reward is not None:
        return "a held-out task (--include-heldout exports them)"
    if traj.status == "error":
        return "an episode error"
    return f"verdict {traj.verdict.status}" if traj.verdict is not None else "no verdict"
