"""``proofgym eval``: run a policy on an environment."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.progress import Progress

from proofgym.cli.console import console


def eval_command(
    env_id: Annotated[str, typer.Argument(metavar="ENV", help="e.g. proofgym/Arith-v0")],
    n: Annotated[Optional[int], typer.Option("-n", "--episodes", min=1,  # noqa: UP045 - typer
                                             help="Episodes to run (default: every task once).")] = None,
    policy: Annotated[str, typer.Option(help="reference | random | control:NAME")] = "reference",
    seed: Annotated[int, typer.Option(help="Seed of the first episode (episode i uses seed+i).")] = 0,
    out: Annotated[Optional[Path], typer.Option(help="Run directory to write.")] = None,  # noqa: UP045
    resume: Annotated[Optional[Path], typer.Option(  # noqa: UP045 - typer
        help="Continue the killed or unfinished run in this directory (same settings).")] = None,
    split: Annotated[Optional[str], typer.Option(  # noqa: UP045 - typer
        help="Evaluate one split only: train | dev | heldout.")] = None,
    splits: Annotated[Optional[Path], typer.Option(  # noqa: UP045 - typer
        help="Split manifest (from `proofgym splits freeze`) to take the splits from.")] = None,
) -> None:
    """Run a policy on an environment and report rewards."""
    from proofgym.core import ProofgymError
    from proofgym.eval import evaluate
    from proofgym.eval.runs import train_split_warning
    from proofgym.rollout import make_policy

    try:
        pol = make_policy(policy, seed=seed)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--policy") from None
    if split not in (None, "train", "dev", "heldout"):
        raise typer.BadParameter(f"unknown split {split!r}; use train, dev or heldout", param_hint="--split")
    if resume is not None and out is not None and out != resume:
        raise typer.BadParameter("--resume DIR continues the run in DIR; drop --out or make it the same",
                                 param_hint="--out")
    out = resume or out or Path("runs") / f"{env_id.replace('/', '_')}-{policy.replace(':', '_')}-s{seed}"
    if split == "train":
        console.print(f"[bold white on red] WARNING [/] [bold red]{train_split_warning(env_id)}[/]")
    try:
        with Progress(console=console, transient=True) as progress:
            bar = progress.add_task(f"{env_id} · {policy}", total=n)
            _, summary = evaluate(env_id, pol, episodes=n, seed=seed,
                                  out=None if resume else out, resume=resume, split=split, splits=splits,
                                  on_episode=lambda _t: progress.advance(bar))
    except ProofgymError as exc:
        console.print(f"[bold red]error:[/] {exc}")
        raise typer.Exit(2) from None
    if summary.get("resumed_from"):
        console.print(f"resumed {out}: kept {summary['resumed_from']} finished episodes")
    print_summary(summary, title=f"{env_id} · policy {policy} · {summary['episodes']} episodes")
    console.print(f"wrote {out / 'trajectories.jsonl'}, {out / 'summary.json'} and {out / 'report.html'}")


def print_summary(summary: dict, *, title: str) -> None:
    from proofgym.cli.summary_table import summary_table

    console.print(summary_table(summary, title=title))
