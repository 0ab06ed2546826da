"""The result of grading one trajectory."""

from __future__ import annotations

import math
import traceback
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

from proofgym.core.errors import ConfigError

VerdictStatus = Literal["scored", "error", "unscored"]


@dataclass(frozen=True)
class Verdict:
    """A grade: more than a float.

    Invariants:
        * ``status == "scored"``: ``reward`` is the grade, finite.
        * ``status == "error"``: the *grader* failed (not the agent); ``error`` says why and
          ``reward`` is meaningless (``0.0``). Consumers must not average it in as a zero.
        * ``reason`` explains a *scored* grade (which checks failed and how, like inspect's
          ``Score.explanation``); ``error`` is never used for that.
        * ``status == "unscored"``: grading was deliberately skipped (e.g. an infrastructure
          failure ended the episode); ``reward`` is meaningless.
        * ``components`` hold the rewarded parts, ``metrics`` the logged-only ones (weight 0).
        * ``errors`` names each part of a composite grader (a rubric component) that raised or
          timed out, with the reason; its siblings' scores are still in ``components``/``metrics``.
          ``failed_gates`` lists the gates that did not pass (the reward is then 0).
    """

    reward: float
    components: dict[str, float] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    status: VerdictStatus = "scored"
    error: str | None = None
    grader: str | None = None
    errors: dict[str, str] = field(default_factory=dict)
    failed_gates: list[str] = field(default_factory=list)
    reason: str | None = None

    def __post_init__(self) -> None:
        # A NaN here would surface only at the end of a run (summaries, the report): refuse it now.
        for kind in ("components", "metrics"):
            for name, value in getattr(self, kind).items():
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                    raise ConfigError(f"Verdict {kind}[{name!r}] must be a finite number, got {value!r}")

    @property
    def scored(self) -> bool:
        return self.status == "scored"

    @classmethod
    def failed(cls, error: str, *, grader: str | None = None, **metrics: float) -> Verdict:
        """A grader failure, carrying the reason."""
        return cls(0.0, metrics=dict(metrics), status="error", error=error, grader=grader)

    @classmethod
    def unscored(cls, reason: str) -> Verdict:
        return cls(0.0, status="unscored", error=reason)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Verdict:
        """Records written before ``errors``/``failed_gates``/``reason`` get the defaults; fields a newer
        proofgym added are ignored, so an older reader still reads the verdict."""
        return cls(**{k: v for k, v in data.items() if k in _FIELDS})


_FIELDS = frozenset(f.name for f in fields(Verdict))


def coerce_verdict(result: object, *, grader: str | None = None) -> Verdict:
    """Turn what ``Task.verify`` returned into a :class:`Verdict`, rejecting nonsense loudly."""
    if isinstance(result, Verdict):
        if result.status == "scored" and not math.isfinite(result.reward):
            return Verdict.failed(f"grader returned a non-finite reward {result.reward!r}",
                                  grader=grader)
        return result
    if isinstance(result, bool) or not isinstance(result, (int, float)):
        return Verdict.failed(
            f"grader returned {type(result).__name__} {result!r}; expected a float or a Verdict",
            grader=grader,
        )
    reward = float(result)
    if not math.isfinite(reward):
        return Verdict.failed(f"grader returned a non-finite reward {reward!r}", grader=grader)
    return Verdict(reward, grader=grader)


def describe_exception(exc: BaseException) -> str:
    """One line naming the exception, then the innermost frame, for a verdict's ``error``."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}: {exc}{where}"
