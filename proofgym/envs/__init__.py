"""Bundled environments. They use the library exactly as a user would."""

from __future__ import annotations

import inspect
from typing import Any

import gymnasium
from gymnasium.envs.registration import load_env_creator

from proofgym.env import UniversalVerifiableEnv, check_render_mode

#: Bundled environment ids and their factories (``module:function``).
BUNDLED = {
    "proofgym/Arith-v0": "proofgym.envs.arith:make_env",
    "proofgym/Guess-v0": "proofgym.envs.guess:make_env",
    "proofgym/CodeRepair-v0": "proofgym.envs.code_repair:make_env",
    "proofgym/SearchQA-v0": "proofgym.envs.search_qa:make_env",
    "proofgym/RepoRepair-v0": "proofgym.envs.repo_repair:make_env",
}


class BundledFactory:
    """The entry point of a bundled env: its ``module:function`` factory, plus Gymnasium's
    ``render_mode`` keyword (which the factories themselves do not take). Prints and pickles as
    the ``module:function`` string it loads."""

    metadata = UniversalVerifiableEnv.metadata

    def __init__(self, entry_point: str) -> None:
        self.entry_point = entry_point

    def __call__(self, *, render_mode: str | None = None, **kwargs: Any) -> UniversalVerifiableEnv:
        env = load_env_creator(self.entry_point)(**kwargs)
        env.render_mode = check_render_mode(render_mode)
        return env

    @property
    def __signature__(self) -> inspect.Signature:
        """The factory's own parameters plus ``render_mode``, so callers that look for one
        (``tasks=``, shared by a run's envs) see it through the wrapper."""
        own = inspect.signature(load_env_creator(self.entry_point))
        extra = inspect.Parameter("render_mode", inspect.Parameter.KEYWORD_ONLY, default=None)
        params = [p for p in own.parameters.values() if p.name != "render_mode"]
        var_kw = [p for p in params if p.kind is inspect.Parameter.VAR_KEYWORD]
        rest = [p for p in params if p.kind is not inspect.Parameter.VAR_KEYWORD]
        return own.replace(parameters=[*rest, extra, *var_kw])

    def __repr__(self) -> str:
        return self.entry_point

    __str__ = __repr__


def register_envs() -> None:
    """Register the bundled environments with Gymnasium (idempotent)."""
    for env_id, entry_point in BUNDLED.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(env_id, entry_point=BundledFactory(entry_point))
