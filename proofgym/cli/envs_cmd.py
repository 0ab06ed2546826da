"""``proofgym envs``: list environments."""

from __future__ import annotations

import gymnasium
from rich.table import Table

from proofgym.cli.console import console


def envs_command() -> None:
    """List the registered proofgym environments."""
    from proofgym.envs import BUNDLED

    table = Table("id", "entry point")
    for env_id, spec in sorted(gymnasium.registry.items()):
        if env_id.startswith("proofgym/") or env_id in BUNDLED:
            table.add_row(env_id, str(spec.entry_point))
    console.print(table)
