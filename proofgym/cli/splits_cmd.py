"""``proofgym splits freeze|show|burn``: the frozen train/dev/heldout manifest of a task set."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from proofgym.cli.console import console

splits_app = typer.Typer(no_args_is_help=True, add_completion=False,
                         help="Freeze, inspect and burn the train/dev/heldout splits of a task set.")


def _fail(exc: Exception) -> None:
    console.print(f"[bold red]error:[/] {exc}")
    raise typer.Exit(2) from None


@splits_app.command("freeze")
def freeze_command(
    env_id: Annotated[str, typer.Argument(metavar="ENV", help="e.g. proofgym/Arith-v0")],
    out: Annotated[Path, typer.Option(help="Manifest file to write.")],
    ratios: Annotated[Optional[str], typer.Option(  # noqa: UP045 - typer
        help="train,dev,heldout fractions summing to 1 (default 0.8,0.1,0.1).")] = None,
    salt: Annotated[str, typer.Option(help="Changes every assignment (a new, independent split).")] = "",
    group_by: Annotated[Optional[str], typer.Option(  # noqa: UP045 - typer
        metavar="KEY", help="Split by this task metadata key (e.g. template, level): the tasks of "
                            "one value share a split.")] = None,
) -> None:
    """Assign every task of ENV to a split by a hash of its id (or of its --group-by value) and
    write the manifest. Tasks whose source assigns their split (RepoRepair's recipe) keep it."""
    from proofgym.core import ProofgymError
    from proofgym.make import make_env

    split_ratios = None
    if ratios is not None:
        try:
            values = [float(x) for x in ratios.split(",")]
        except ValueError:
            raise typer.BadParameter(f"{ratios!r} is not three comma-separated numbers",
                                     param_hint="--ratios") from None
        if len(values) != 3:
            raise typer.BadParameter("give three fractions: train,dev,heldout", param_hint="--ratios")
        split_ratios = dict(zip(("train", "dev", "heldout"), values, strict=True))
    if out.exists():
        _fail(FileExistsError(f"{out} exists; a frozen manifest is never overwritten (choose another "
                              "file, or delete it knowingly)"))
    env = make_env(env_id)
    try:
        if env.tasks is None:
            _fail(ValueError(f"{env_id!r} has no task set"))
        try:
            tasks = env.tasks.with_splits(ratios=split_ratios, salt=salt, group_by=group_by)
        except ProofgymError as exc:
            _fail(exc)
        tasks.manifest.save(out)
        _print(tasks.manifest, out)
    finally:
        env.close()


@splits_app.command("show")
def show_command(manifest: Annotated[Path, typer.Argument(help="A manifest file or run directory.")]) -> None:
    """Print split sizes, the manifest hash and the burned tasks."""
    from proofgym.tasks import SplitManifest, SplitManifestError

    path = manifest / "splits.json" if manifest.is_dir() else manifest
    try:
        _print(SplitManifest.load(path), path)
    except (SplitManifestError, FileNotFoundError) as exc:
        _fail(exc)


@splits_app.command("burn")
def burn_command(
    manifest: Annotated[Path, typer.Argument(help="The manifest file to update.")],
    task_ids: Annotated[list[str], typer.Argument(metavar="TASK_ID...",
                                                  help="Tasks that influenced training.")],
    reason: Annotated[str, typer.Option(help="What they influenced (recorded in the manifest).")],
) -> None:
    """Mark tasks as burned: they leave the held-out pool, and the manifest records why."""
    from proofgym.tasks import SplitManifest, SplitManifestError

    try:
        loaded = SplitManifest.load(manifest)
        for task_id in task_ids:
            loaded.burn(task_id, reason)
        loaded.save(manifest)
    except (SplitManifestError, FileNotFoundError) as exc:
        _fail(exc)
    _print(loaded, manifest)


def _print(manifest, path: Path) -> None:
    grouped = f" · grouped by {manifest.group_by}" if manifest.group_by else ""
    if manifest.assigned_by:
        grouped += f" · assigned by {manifest.assigned_by}"
    console.print(f"{manifest.taskset} · splits {manifest.digest}{grouped} · {path}", highlight=False)
    table = Table(show_header=False)
    for name, count in manifest.counts().items():
        table.add_row(name, str(count))
    console.print(table)
    for task_id, entry in manifest.burned.items():
        console.print(f"burned {task_id} (was {entry['was']}): {entry['reason']}")
