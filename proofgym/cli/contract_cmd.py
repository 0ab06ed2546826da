"""``proofgym contract show RUN`` and ``proofgym contract diff A B [--parity FILE]``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from proofgym.cli.console import console

contract_app = typer.Typer(no_args_is_help=True, add_completion=False,
                           help="Show and compare rollout contracts (what a run's behaviour depends on).")


@contract_app.command("show")
def show_command(
    run: Annotated[Path, typer.Argument(help="A run directory or its contract.json.")],
) -> None:
    """Print the rollout contract of a run as canonical JSON (its hash is the contract id)."""
    from proofgym.record import ContractError, RolloutContract

    try:
        contract = RolloutContract.load(run)
    except ContractError as exc:
        console.print(f"[bold red]error:[/] {exc}")
        raise typer.Exit(2) from None
    typer.echo(contract.to_json().decode())


@contract_app.command("diff")
def diff_command(
    a: Annotated[Path, typer.Argument(help="First run directory (or contract.json).")],
    b: Annotated[Path, typer.Argument(help="Second run directory (or contract.json).")],
    parity: Annotated[Optional[Path], typer.Option(  # noqa: UP045 - typer
        help="TOML file of allowed differences: [[allow]] path = '...' reason = '...'.")] = None,
) -> None:
    """Print the settings that differ, by category. Exit 1 when a difference is not declared in
    the parity file, 0 when there is none (or all are declared), 2 on unreadable input."""
    from proofgym.record import ContractError, RolloutContract, apply_parity, diff_contracts, load_parity

    try:
        ca, cb = RolloutContract.load(a), RolloutContract.load(b)
        rules = load_parity(parity) if parity is not None else []
    except ContractError as exc:
        console.print(f"[bold red]error:[/] {exc}")
        raise typer.Exit(2) from None
    diffs = apply_parity(diff_contracts(ca, cb), rules)
    typer.echo(f"A: {ca.id}  ({a})\nB: {cb.id}  ({b})")
    if not diffs:
        typer.echo("identical contracts")
        return
    category = None
    for d in diffs:
        if d.category != category:
            category = d.category
            count = sum(1 for x in diffs if x.category == category)
            typer.echo(f"\n[{category}] {count} difference{'s' * (count != 1)}")
        mark = "allowed" if d.allowed else "DIFFERS"
        typer.echo(f"  {mark}  {d.path}\n      A: {d.a!r}\n      B: {d.b!r}")
        if d.allowed:
            typer.echo(f"      reason: {d.reason}")
    undeclared = [d for d in diffs if not d.allowed]
    typer.echo(f"\n{len(diffs)} difference(s), {len(undeclared)} not declared"
               + (f" in {parity}" if parity else " (no --parity file given)"))
    if undeclared:
        raise typer.Exit(1)
