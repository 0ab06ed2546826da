"""``proofgym parity A B``: probe two deployments of one env per tool and diff what they answer."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer


def parity_command(
    a: Annotated[str, typer.Argument(help="An env id (built here) or a server URL (ws://HOST:PORT).")],
    b: Annotated[str, typer.Argument(help="The other deployment, the same way.")],
    parity: Annotated[Optional[Path], typer.Option(  # noqa: UP045 - typer
        help="TOML file of allowed differences, as for `contract diff`: [[allow]] path, reason.")] = None,
    seed: Annotated[int, typer.Option(help="Reset seed of both sides.")] = 0,
    task: Annotated[Optional[str], typer.Option(  # noqa: UP045 - typer
        help="Task to probe in (default: the first train task of A).")] = None,
    token_a: Annotated[Optional[str], typer.Option(help="Bearer token for A.")] = None,  # noqa: UP045
    token_b: Annotated[Optional[str], typer.Option(help="Bearer token for B.")] = None,  # noqa: UP045
) -> None:
    """Send the same probes (success, empty, malformed, denied, timed-out call per tool) to A
    and B; print the differences in tool schemas, error kinds and observations. Exit 1 when one
    is not declared in the parity file, 0 when there is none (or all are declared)."""
    from proofgym.record import load_parity
    from proofgym.remote.parity import PROBES, run_parity

    rules = load_parity(parity) if parity is not None else []
    diffs, results = run_parity(a, b, seed=seed, task_id=task, rules=rules, token_a=token_a,
                                token_b=token_b)
    tools = sorted({key.split(".")[0] for key in results["a"]})
    typer.echo(f"A: {a}\nB: {b}\nprobed {len(tools)} tools ({', '.join(tools)}) x {len(PROBES)} probes "
               f"in task {results['task_id']} (seed {results['seed']})")
    for d in diffs:
        tool = d.path.split(".")[1]
        mark = "allowed" if d.allowed else "DIFFERS"
        typer.echo(f"  {mark}  tool {tool}: {d.path}\n      A: {d.a!r}\n      B: {d.b!r}")
        if d.allowed:
            typer.echo(f"      reason: {d.reason}")
    undeclared = [d for d in diffs if not d.allowed]
    named = sorted({d.path.split(".")[1] for d in undeclared})
    typer.echo(f"{len(diffs)} difference(s), {len(undeclared)} not declared"
               + (f" (tools: {', '.join(named)})" if named else ""))
    if undeclared:
        raise typer.Exit(1)
