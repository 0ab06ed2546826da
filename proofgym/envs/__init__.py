"""Bundled environments. They use the library exactly as a user would."""

from __future__ import annotations

import gymnasium

#: Bundled environment ids and their factories (``module:function``).
BUNDLED = {
    "proofgym/Arith-v0": "proofgym.envs.arith:make_env",
    "proofgym/Guess-v0": "proofgym.envs.guess:make_env",
    "proofgym/CodeRepair-v0": "proofgym.envs.code_repair:make_env",
}


def register_envs() -> None:
    """Register the bundled environments with Gymnasium (idempotent)."""
    for env_id, entry_point in BUNDLED.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(env_id, entry_point=entry_point)
