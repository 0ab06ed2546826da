"""``proofgym eval``: run a policy on an environment."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.progress import Progress
from rich.table import Table

from proofgym.cli.console import console


def eval_command(
    env_id: Annotated[str, typer.Argument(metavar="ENV", help="e.g. proofgym/Arith-v0")],
    n: Annotated[Optional[int], typer.Option("-n", "--episodes", min=1,  # noqa: UP045 - typer
                                             help="Episodes to run (default: every task once).")] = None,
    policy: Annotated[str, typer.Option(
        help="reference | random | control:NAME | openai:MODEL (with --base-url)")] = "reference",
    seed: Annotated[int, typer.Option(help="Seed of the first episode (episode i uses seed+i).")] = 0,
    out: Annotated[Optional[Path], typer.Option(help="Run directory to write.")] = None,  # noqa: UP045
    base_url: Annotated[Optional[str], typer.Option(  # noqa: UP045
        help="OpenAI-compatible server for openai:MODEL, e.g. http://localhost:8000/v1.")] = None,
    api_key: Annotated[Optional[str], typer.Option(  # noqa: UP045
        envvar="OPENAI_API_KEY", show_envvar=True, help="API key for openai:MODEL.")] = None,
    system_prompt: Annotated[Optional[str], typer.Option(  # noqa: UP045
        help="System prompt for openai:MODEL.")] = None,
    policy_version: Annotated[str, typer.Option(
        help="Version recorded on every trajectory (a checkpoint or training step).")] = "0",
    concurrency: Annotated[int, typer.Option(
        "-c", "--concurrency", min=1, help="Episodes in flight at once (the async orchestrator).")] = 1,
    repeats: Annotated[int, typer.Option(
        "-G", "--repeats", min=1, help="Attempts per task, recorded as a group.")] = 1,
    verifier: Annotated[str, typer.Option(
        help="process (out of band, crash-isolated) | inline (in the episode's slot)")] = "process",
    grader_processes: Annotated[int, typer.Option(min=1, help="Grader worker processes.")] = 2,
    grader_jobs: Annotated[int, typer.Option(min=1, help="Grading jobs in flight at once.")] = 64,
    grader_timeout: Annotated[float, typer.Option(help="Seconds a grading job may take.")] = 60.0,
) -> None:
    """Run a policy on an environment and report rewards."""
    from proofgym.eval import evaluate
    from proofgym.rollout import is_async_policy, make_policy
    from proofgym.rollout.progress import RunProgress
    from proofgym.verify.pool import VerifierPool

    if verifier not in ("process", "inline"):
        raise typer.BadParameter(f"{verifier!r}; use 'process' or 'inline'", param_hint="--verifier")
    options = {}
    if policy.startswith("openai:"):
        options = {"base_url": base_url, "api_key": api_key, "system_prompt": system_prompt,
                   "version": policy_version}
    elif base_url is not None:
        raise typer.BadParameter("--base-url is for --policy openai:MODEL", param_hint="--base-url")
    try:
        pol = make_policy(policy, seed=seed, **options)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--policy") from None
    run_name = f"{env_id}-{policy}-s{seed}".replace("/", "_").replace(":", "_")
    out = out or Path("runs") / run_name
    title = f"{env_id} · {policy}"
    if concurrency > 1 or is_async_policy(pol):
        with VerifierPool(verifier, processes=grader_processes, max_in_flight=grader_jobs,  # type: ignore[arg-type]
                          timeout_s=grader_timeout) as pool:
            _, summary = evaluate(env_id, pol, episodes=n, repeats=repeats, seed=seed, out=out,
                                  concurrency=concurrency, verifier=pool,
                                  progress=RunProgress(title, console=console))
    else:
        with Progress(console=console, transient=True) as progress:
            bar = progress.add_task(title, total=n)
            _, summary = evaluate(env_id, pol, episodes=n, repeats=repeats, seed=seed, out=out,
                                  on_episode=lambda _t: progress.advance(bar))
    print_summary(summary, title=f"{env_id} · policy {policy} · {summary['episodes']} episodes")
    console.print(f"wrote {out / 'trajectories.jsonl'} and {out / 'summary.json'}")


def print_summary(summary: dict, *, title: str) -> None:
    table = Table(title=title, show_header=False)
    for key in ("episodes", "scored", "mean_reward", "terminated_rate", "truncated_rate",
                "truncation_reasons", "verify_errors", "episode_errors", "tool_errors"):
        value = summary.get(key)
        table.add_row(key, f"{value:.4f}" if isinstance(value, float) else str(value))
    console.print(table)
