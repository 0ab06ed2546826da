"""Fault profiles: how often the simulated search service fails, and how, per tool call.

Every decision is a pure function of the episode's fault seed and the call's number in the
episode, so the same seed and the same calls meet the same faults.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from proofgym.core.errors import ConfigError

#: Which faults each tool can meet (``wait`` never fails).
TOOL_FAULTS = {
    "search": ("timeout", "rate_limited", "server_error", "truncated"),
    "open": ("timeout", "rate_limited", "server_error", "stale"),
    "find_in_document": ("timeout", "rate_limited", "server_error"),
}
#: Simulated seconds each call takes; a rate limit expires after ``retry_after_s`` of them.
CALL_SECONDS = 0.5


@dataclass(frozen=True)
class FaultProfile:
    """Per-call probabilities of each fault, and bounds that keep a careful agent able to finish.

    Attributes:
        timeout: The call exceeds its budget and returns a ``timeout`` error.
        rate_limited: ``rate_limited`` with a retry-after; calls before it passes fail the same way.
        server_error: A transient ``server_error`` (a 503).
        truncated: ``search`` delivers only part of the page and says so.
        stale: ``open`` finds the index entry stale (the document moved): ``not_found`` until the
            agent searches again.
        retry_after_s: Seconds a rate limit lasts (``wait`` passes them; each call takes 0.5 s).
        max_consecutive: At most this many faults drawn in a row (a fault never lasts forever).
    """

    timeout: float = 0.0
    rate_limited: float = 0.0
    server_error: float = 0.0
    truncated: float = 0.0
    stale: float = 0.0
    retry_after_s: float = 2.0
    max_consecutive: int = 2

    def __post_init__(self) -> None:
        kinds = ("timeout", "rate_limited", "server_error", "truncated", "stale")
        for k in kinds:
            p = getattr(self, k)
            if not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
                raise ConfigError(f"fault probability {k}={p!r} must be a number in [0, 1]")
        for tool, tool_kinds in TOOL_FAULTS.items():
            if sum(getattr(self, k) for k in tool_kinds) > 1.0:
                raise ConfigError(f"the fault probabilities of {tool!r} ({', '.join(tool_kinds)}) "
                                  "add up to more than 1")
        if not 0 < self.retry_after_s <= 60:
            raise ConfigError(f"retry_after_s={self.retry_after_s!r} must be in (0, 60]")
        if not isinstance(self.max_consecutive, int) or not 1 <= self.max_consecutive <= 10:
            raise ConfigError(f"max_consecutive={self.max_consecutive!r} must be an integer in [1, 10]")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


PROFILES: dict[str, FaultProfile] = {
    "none": FaultProfile(),
    "realistic": FaultProfile(timeout=0.05, rate_limited=0.05, server_error=0.03, truncated=0.08,
                              stale=0.08, retry_after_s=2.0, max_consecutive=2),
    "harsh": FaultProfile(timeout=0.12, rate_limited=0.12, server_error=0.08, truncated=0.15,
                          stale=0.15, retry_after_s=5.0, max_consecutive=3),
}


def resolve_faults(faults: str | Mapping[str, Any] | FaultProfile) -> FaultProfile:
    """A profile by name (``none``, ``realistic``, ``harsh``) or from a dict of its fields."""
    if isinstance(faults, FaultProfile):
        return faults
    if isinstance(faults, str):
        if faults not in PROFILES:
            raise ConfigError(f"unknown fault profile {faults!r}; use one of {sorted(PROFILES)} "
                              "or a dict of fault probabilities")
        return PROFILES[faults]
    if isinstance(faults, Mapping):
        known = {f.name for f in fields(FaultProfile)}
        unknown = set(faults) - known
        if unknown:
            raise ConfigError(f"unknown fault settings {sorted(unknown)}; the known ones are {sorted(known)}")
        return FaultProfile(**dict(faults))
    raise TypeError(f"faults must be a profile name, a dict or a FaultProfile, not {type(faults).__name__}")


def draw(state: dict[str, Any], tool: str) -> str | None:
    """The fault (or ``None``) this call of ``tool`` meets; advances the episode's call counter
    and simulated clock in ``state``."""
    profile = FaultProfile(**state["profile"])
    call = state["calls"]
    state["calls"] = call + 1
    state["clock"] += CALL_SECONDS
    if state["clock"] < state["blocked_until"]:
        return "rate_limited"  # still inside the window of an earlier rate limit
    kinds = TOOL_FAULTS.get(tool, ())
    if not kinds or state["streak"] >= profile.max_consecutive:
        state["streak"] = 0
        return None
    digest = hashlib.sha256(f"searchqa-fault:{state['fault_seed']}:{call}".encode()).digest()
    u = int.from_bytes(digest[:8], "little") / 2**64
    chosen = None
    for kind in kinds:
        u -= getattr(profile, kind)
        if u < 0:
            chosen = kind
            break
    state["streak"] = state["streak"] + 1 if chosen else 0
    if chosen == "rate_limited":
        state["blocked_until"] = state["clock"] + profile.retry_after_s
    return chosen


def initial_state(profile: FaultProfile) -> dict[str, Any]:
    """The per-episode state the tools keep (the env sets ``fault_seed`` at every reset)."""
    return {"profile": profile.to_dict(), "fault_seed": 0, "calls": 0, "clock": 0.0,
            "blocked_until": 0.0, "streak": 0, "stale_doc": None, "log": []}
