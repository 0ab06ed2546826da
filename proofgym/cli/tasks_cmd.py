"""``proofgym tasks synth|stats``: synthesise bug-fix tasks from real PyPI projects, and report
what the task set contains."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from proofgym.cli.console import console

tasks_app = typer.Typer(no_args_is_help=True, add_completion=False,
                        help="Synthesise tasks from real projects and report their distribution.")


def _defaults() -> tuple[Path, Path]:
    from proofgym.envs.repo_repair import MANIFEST, RECIPE

    return RECIPE, MANIFEST


@tasks_app.command("synth")
def synth_command(
    recipe: Annotated[Path | None, typer.Option(help="Recipe JSON (default: RepoRepair-v0's).")] = None,
    manifest: Annotated[Path | None, typer.Option(help="Task manifest (JSONL) to write into.")] = None,
    project: Annotated[list[str] | None, typer.Option(help="Only these projects (repeatable).")] = None,
    max_tasks: Annotated[int | None, typer.Option(
        help="Tier-1 tasks per project (default: the recipe's).")] = None,
    time_budget: Annotated[float | None, typer.Option(help="Seconds of screening per project.")] = None,
    grade: Annotated[bool, typer.Option(help="Gate every task on the real grader.")] = True,
    cache: Annotated[Path | None, typer.Option(
        help="Task directories' cache (default: $PROOFGYM_CACHE/tasks).")] = None,
) -> None:
    """Fetch each project's sdist, keep its stable tests, inject seeded bugs and keep the valid
    ones; one project at a time (the run is CPU-heavy: `nice -n 19` it on a shared machine)."""
    from proofgym.envs.repo_repair.synth import synthesize

    default_recipe, default_manifest = _defaults()
    reports = synthesize(recipe or default_recipe, manifest or default_manifest,
                         projects=project or None, max_tasks=max_tasks,
                         time_budget_s=time_budget, grade=grade, cache_root=cache)
    for report in reports:
        console.print(f"{report.project}: {len(report.records)} tasks from {report.tried} "
                      f"candidates in {report.seconds:.0f} s", highlight=False)
    _drain_thread_pools()


def _drain_thread_pools() -> None:
    """Finish the queued work of every thread pool (the gradings' sandbox clean-ups) and stop
    their idle workers, as the interpreter's own shutdown does: gradings ran in this process, and
    the CLI's exit joins every non-daemon thread before that shutdown, so an idle pool worker
    would keep the command from ever ending."""
    import concurrent.futures.thread as pools

    pools._python_exit()


@tasks_app.command("stats")
def stats_command(
    recipe: Annotated[Path | None, typer.Option(help="Recipe JSON (default: RepoRepair-v0's).")] = None,
    manifest: Annotated[Path | None, typer.Option(help="Task manifest (JSONL).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
) -> None:
    """Per project, operator and tier; the fail-to-pass histogram; validation rate; median
    grading time."""
    import orjson

    from proofgym.envs.repo_repair import split_of
    from proofgym.envs.repo_repair.synth import read_reports
    from proofgym.tasks.synth import Recipe, read_manifest
    from proofgym.tasks.synth.stats import distribution, format_report

    default_recipe, default_manifest = _defaults()
    manifest = manifest or default_manifest
    if not manifest.is_file():
        raise typer.BadParameter(f"{manifest} does not exist; synthesise tasks first "
                                 "(proofgym tasks synth)", param_hint="--manifest")
    records = read_manifest(manifest)
    pins = Recipe.load(recipe or default_recipe)
    splits = {r.id: split_of(r, pins) for r in records if r.project in {p.name for p in pins.projects}}
    report = distribution(records, read_reports(manifest.with_suffix(".report.json")), splits)
    if json_out:
        typer.echo(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
    else:
        typer.echo(format_report(report), nl=False)
