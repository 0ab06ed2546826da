"""``proofgym/SearchQA-v0``: research questions over a frozen Debian package index, answered
through search tools that fail the way remote services fail.

The corpus is 8,900 package records of Debian 12 "bookworm" (main, amd64), indexed with SQLite
FTS5. The tools (``search``, ``open``, ``find_in_document``, ``wait``) meet timeouts, rate
limits, server errors, truncated pages and stale index entries as the fault profile says,
deterministically per episode seed. See docs/search-qa.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from proofgym.core import Limits
from proofgym.core.errors import ConfigError
from proofgym.env import UniversalVerifiableEnv
from proofgym.envs.search_qa.corpus import Corpus, corpus
from proofgym.envs.search_qa.faults import PROFILES, FaultProfile, initial_state, resolve_faults
from proofgym.envs.search_qa.tasks import LEVELS, SearchQATask, generate
from proofgym.envs.search_qa.tools import TOOLS
from proofgym.runtimes import InProcessRuntime
from proofgym.tasks import TaskSet


@cache
def _generated(n_per_level: int, seed: int) -> tuple[SearchQATask, ...]:
    return tuple(generate(corpus(), n_per_level, seed=seed))


def search_qa_tasks(n_per_level: int = 120, *, seed: int = 0,
                    levels: tuple[int, ...] = LEVELS) -> TaskSet:
    """``n_per_level`` tasks of each of ``levels`` (600 by default), generated from the corpus."""
    bad = set(levels) - set(LEVELS)
    if bad or not levels:
        raise ConfigError(f"levels must be a non-empty subset of {LEVELS}, got {list(levels)}")
    if not 1 <= n_per_level <= 200:
        raise ConfigError(f"n_per_level must be between 1 and 200, got {n_per_level}")
    tasks = [t for t in _generated(n_per_level, seed) if t.level in levels]
    return TaskSet(tasks, name=f"searchqa-s{seed}-n{n_per_level}")


class SearchQAEnv(UniversalVerifiableEnv):
    """The universal env, plus one thing: each reset draws the episode's fault seed from the
    env's seeded generator, so the same reset seed meets the same faults."""

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        obs, info = super().reset(seed=seed, options=options)
        self.runtime.state["fault_seed"] = int(self.np_random.integers(2**62))
        return obs, info


def make_env(faults: str | Mapping[str, Any] | FaultProfile = "realistic", n_per_level: int = 120,
             seed: int = 0, levels: tuple[int, ...] = LEVELS, max_tool_calls: int = 80,
             tasks: TaskSet | None = None) -> SearchQAEnv:
    """``faults``: ``"none"``, ``"realistic"`` (default), ``"harsh"`` or a dict of
    :class:`FaultProfile` fields. ``tasks``: an already built task set of these settings."""
    profile = resolve_faults(faults)
    # Calls run inline (no worker thread, no per-call state copy): a query is bounded (at most 16
    # terms, one page) and never blocks, and timeouts are the fault profile's to simulate.
    runtime = InProcessRuntime(list(TOOLS), timeout_s=None, initial_state=initial_state(profile))
    tasks = tasks if tasks is not None else search_qa_tasks(n_per_level, seed=seed, levels=tuple(levels))
    return SearchQAEnv(runtime, tasks=tasks, limits=Limits(max_turns=1, max_tool_calls=max_tool_calls))


__all__ = ["LEVELS", "PROFILES", "Corpus", "FaultProfile", "SearchQAEnv", "SearchQATask", "corpus",
           "make_env", "resolve_faults", "search_qa_tasks"]
