"""``proofgym tasks synth|history|stats|restate``: synthesise bug-fix tasks from real PyPI
projects, and report what the task set contains."""

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
        if report.refused is not None:
            console.print(f"{report.project}: no tasks: {report.refused}", highlight=False)
            continue
        console.print(f"{report.project}: {len(report.records)} tasks from {report.tried} "
                      f"candidates in {report.seconds:.0f} s", highlight=False)
    _drain_thread_pools()


@tasks_app.command("history")
def history_command(
    names: Annotated[list[str], typer.Argument(help="Projects of the recipe.", metavar="NAME...")],
    recipe: Annotated[Path | None, typer.Option(help="Recipe JSON (default: RepoRepair-v0's).")] = None,
    manifest: Annotated[Path | None, typer.Option(help="Task manifest (JSONL) to write into.")] = None,
    grade: Annotated[bool, typer.Option(help="Gate every task on the real grader.")] = True,
    cache: Annotated[Path | None, typer.Option(
        help="Task directories' cache (default: $PROOFGYM_CACHE/tasks).")] = None,
    pairs: Annotated[int, typer.Option(min=1, help=(
        "Consecutive release pairs per project, walking back from the pinned release (each "
        "graded with its own release's source and suite; earlier releases that give tasks are "
        "pinned in the recipe's `releases`)."))] = 1,
    skip: Annotated[int, typer.Option(min=0, help="Leave out the first pairs (already synthesised).")] = 0,
) -> None:
    """Tasks from real bugs: the fixes the pinned release made since the release before it on
    the index (and, with --pairs K, each of the K - 1 release pairs before that), each reverted
    (delta debugging over the source hunks), with the changelog entry as the report when one
    matches; one line per project and pair saying why it gave none."""
    from proofgym.envs.repo_repair.synth import synthesize_history

    default_recipe, default_manifest = _defaults()
    reports = synthesize_history(recipe or default_recipe, manifest or default_manifest,
                                 projects=names, grade=grade, cache_root=cache, pairs=pairs, skip=skip)
    for report in reports:
        line = (f"{report.project}: {len(report.records)} tasks from release "
                f"{report.before or '?'}->{report.after}")
        console.print(line + (f"; {report.reason}" if report.reason else ""), highlight=False)
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
    tells: Annotated[bool, typer.Option(
        help="Also the tell rate per operator (greps each project's source: fetches its sdist).")] = False,
) -> None:
    """Per project, operator and tier; the fail-to-pass histogram; validation rate; median
    grading time; with --tells, the tell rate per operator."""
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
    if tells:
        from proofgym.tasks.synth.tells import project_source, tell_rates

        rates = tell_rates(records, lambda name: project_source(pins.project(name)))
        report["tells"] = {k: v for k, v in rates.items() if k != "ids"}
    if json_out:
        typer.echo(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
    else:
        typer.echo(format_report(report), nl=False)


@tasks_app.command("pin")
def pin_command(
    requirement: Annotated[str, typer.Argument(metavar="NAME==VERSION", help="e.g. inflection==0.5.1")],
    recipe: Annotated[Path | None, typer.Option(
        help="Add (or replace) the project's entry in this recipe JSON (created if missing).")] = None,
    split: Annotated[str, typer.Option(help="train | heldout (held-out projects never train).")] = "train",
) -> None:
    """Print the recipe entry of NAME==VERSION: its sdist's URL and sha256 from the index, and the
    tests, source and python_path read off the unpacked sdist."""
    import orjson

    from proofgym.tasks.synth import Recipe
    from proofgym.tasks.synth.pin import pin_project

    name, sep, version = requirement.partition("==")
    if not sep or not name.strip() or not version.strip():
        raise typer.BadParameter(f"{requirement!r}: give NAME==VERSION, e.g. inflection==0.5.1",
                                 param_hint="NAME==VERSION")
    if split not in ("train", "heldout"):
        raise typer.BadParameter(f"{split!r}; use train or heldout", param_hint="--split")
    pin = pin_project(name.strip(), version.strip(), split=split)
    typer.echo(orjson.dumps(pin.to_dict(), option=orjson.OPT_INDENT_2).decode())
    if recipe is not None:
        current = Recipe.load(recipe) if recipe.exists() else Recipe((), recipe)
        recipe.write_bytes(current.with_project(pin).to_json())
        console.print(f"wrote {pin.key} into {recipe}", highlight=False)


@tasks_app.command("fetch")
def fetch_command(
    recipe: Annotated[Path | None, typer.Option(help="Recipe JSON (default: RepoRepair-v0's).")] = None,
    project: Annotated[list[str] | None, typer.Option(help="Only these projects (repeatable).")] = None,
    jobs: Annotated[int, typer.Option("-j", "--jobs", min=1, help="Downloads at once.")] = 8,
) -> None:
    """Warm the sdist cache ($PROOFGYM_CACHE, else ~/.cache/proofgym) for a recipe's projects,
    several downloads at once, each verified against its pinned sha256."""
    import threading
    import time

    from proofgym.tasks.synth import Recipe
    from proofgym.tasks.synth.fetch import FetchError
    from proofgym.tasks.synth.pin import fetch_pins

    pins = Recipe.load(recipe or _defaults()[0])
    chosen = [p for p in pins.projects if not project or p.name in project]
    unknown = sorted(set(project or ()) - {p.name for p in chosen})
    if unknown:
        raise typer.BadParameter(f"not in the recipe: {', '.join(unknown)}", param_hint="--project")
    start, lock, done = time.monotonic(), threading.Lock(), [0]

    def say(pin, got) -> None:
        with lock:
            done[0] += 1
            state = f"failed: {got}" if isinstance(got, FetchError) else "ok"
            console.print(f"[{done[0]}/{len(chosen)}] {pin.key}: {state}", highlight=False)

    results = fetch_pins(chosen, jobs=jobs, on_done=say)
    failed = [name for name, got in results.items() if isinstance(got, FetchError)]
    console.print(f"{len(chosen) - len(failed)} of {len(chosen)} sdists cached in "
                  f"{time.monotonic() - start:.1f} s", highlight=False)
    if failed:
        raise typer.Exit(1)


@tasks_app.command("restate")
def restate_command(
    recipe: Annotated[Path | None, typer.Option(help="Recipe JSON (default: RepoRepair-v0's).")] = None,
    manifest: Annotated[Path | None, typer.Option(help="Task manifest (JSONL) to restate in place.")] = None,
    project: Annotated[list[str] | None, typer.Option(help="Only these projects (repeatable).")] = None,
) -> None:
    """Re-derive every written bug report (not a changelog entry) with the offline writer, from
    the task's failing tests run on its buggy source (one sandbox per project; `nice -n 19` it
    on a shared machine). Deterministic: re-running it writes the same reports."""
    from proofgym.tasks.synth import Recipe, read_manifest
    from proofgym.tasks.synth.manifest import write_manifest
    from proofgym.tasks.synth.restate import restate

    default_recipe, default_manifest = _defaults()
    manifest = manifest or default_manifest
    pins = Recipe.load(recipe or default_recipe)
    result = restate(read_manifest(manifest), pins.pin_of, projects=project or None)
    write_manifest(manifest, result.records)
    typer.echo(result.summary())


@tasks_app.command("curate")
def curate_command(
    recipe: Annotated[Path | None, typer.Option(help="Recipe JSON (default: RepoRepair-v0's).")] = None,
    manifest: Annotated[Path | None, typer.Option(help="Task manifest (JSONL) to curate in place.")] = None,
    dry_run: Annotated[bool, typer.Option(help="Print what would be dropped; write nothing.")] = False,
) -> None:
    """Drop the tasks a grep for their operator's signature finds, those failing with a
    NameError of a name the bug deleted, and tier-2 tasks spread over modules; rewrite template
    reports. Fetches each project's sdist; re-runnable (a curated manifest stays as it is)."""
    from proofgym.tasks.synth import Recipe, read_manifest
    from proofgym.tasks.synth.curate import curate
    from proofgym.tasks.synth.manifest import write_manifest
    from proofgym.tasks.synth.tells import project_source

    default_recipe, default_manifest = _defaults()
    manifest = manifest or default_manifest
    pins = Recipe.load(recipe or default_recipe)
    result = curate(read_manifest(manifest), lambda name: project_source(pins.project(name)))
    if not dry_run:
        write_manifest(manifest, result.kept)
    typer.echo(("would have " if dry_run else "") + result.summary())
