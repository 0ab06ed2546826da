"""Rubrics: named, weighted grading components, each run on its own.

A component is any ``fn(trace, runtime) -> float | bool | Verdict`` (the signature of
``Task.verify``), so a task's own check, a built-in grader and an LLM judge compose the same way.

Isolation choice: every component with a timeout runs on a *daemon worker thread* (reused from a
small shared pool) and is waited for at most its timeout. A component that raises or times out
becomes an entry in ``Verdict.errors`` and its siblings still score. Python cannot kill a thread, so
a hung component is *abandoned*: it keeps its worker until it returns (the pool starts another), but
it never blocks the rubric, the run or interpreter exit (daemon). That suits graders that wait (an
HTTP judge, a slow parse); a grader that may spin forever on untrusted input belongs in the
process-isolated verifier pool, which can kill it. A component whose timeout is ``None`` (and a
rubric with ``timeout_s=None``) runs inline in the caller's thread: still isolated from raising,
not from hanging.
"""

from __future__ import annotations

import concurrent.futures as cf
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from proofgym.core import Trace, Verdict, describe_exception
from proofgym.core.errors import GraderSpecError
from proofgym.daemon import DaemonThreads

ComponentFn = Callable[[Trace, Any], "float | bool | Verdict"]


@dataclass(frozen=True)
class Component:
    """One part of a rubric.

    Attributes:
        name: Unique within the rubric; the key in ``components``/``metrics``/``errors``.
        fn: ``fn(trace, runtime)``; returns a number in ``scale``, a bool, or a ``Verdict``.
        weight: Share of the reward. ``0`` makes a *metric*: recorded, never rewarded.
        gate: When true, the component must pass (normalised score >= ``pass_at``) for the trajectory
            to earn any reward; a failed gate sets the reward to 0 and is named in ``failed_gates``.
        scale: The ``(low, high)`` range ``fn`` returns; scores are mapped to [0, 1] before combining.
            A value outside the range is a grader bug, recorded as an error on this component.
        pass_at: Normalised score a gate needs.
        timeout_s: Per-component limit (default: the rubric's).
        version: Recorded in :meth:`Rubric.describe` (change it when the grading logic changes).
    """

    name: str
    fn: ComponentFn
    weight: float = 1.0
    gate: bool = False
    scale: tuple[float, float] = (0.0, 1.0)
    pass_at: float = 1.0
    timeout_s: float | None = None
    version: str = "1"

    def __post_init__(self) -> None:
        if not self.name:
            raise GraderSpecError("a rubric component needs a name")
        if not math.isfinite(self.weight) or self.weight < 0:
            raise GraderSpecError(f"component {self.name!r}: weight must be a finite number >= 0")
        low, high = self.scale
        if not (math.isfinite(low) and math.isfinite(high) and high > low):
            raise GraderSpecError(f"component {self.name!r}: scale must be (low, high) with high > low")

    def normalise(self, raw: float | bool | Verdict) -> float:
        """The raw result mapped to [0, 1]; raises ``ValueError`` for an unusable result."""
        if isinstance(raw, Verdict):
            if not raw.scored:
                raise GraderSpecError(f"returned a {raw.status} verdict: {raw.error}")
            raw = raw.reward
        if isinstance(raw, bool):
            return float(raw)
        if not isinstance(raw, (int, float)):
            raise GraderSpecError(f"returned {type(raw).__name__} {raw!r}; expected a number, bool or "
                                  "Verdict")
        value = float(raw)
        low, high = self.scale
        if not math.isfinite(value) or not low <= value <= high:
            raise GraderSpecError(f"returned {value!r}, outside its declared scale [{low:g}, {high:g}]")
        return (value - low) / (high - low)


#: A hung component keeps its thread (the pool starts another), so a hang never costs the caller.
_WORKERS = DaemonThreads("proofgym-rubric")


class Rubric:
    """Named, weighted components combined into one :class:`Verdict`.

    Invariants:
        * the reward depends only on components with ``weight > 0`` (and on gates): adding,
          changing or breaking a weight-0 metric never changes it;
        * ``aggregate="mean"`` gives ``sum(w * s) / sum(w)`` over rewarded components (a reward in
          [0, 1]); ``"sum"`` gives ``sum(w * s)``; ``s`` is each score normalised by its scale;
        * a component that raises, times out or returns nonsense is named in ``errors``; when it is
          a gate or carries weight the reward cannot be computed and the verdict is
          ``status="error"`` (never a silent 0), otherwise the verdict stays ``scored``.
    """

    def __init__(self, components: Iterable[Component], *, name: str = "rubric", version: str = "1",
                 timeout_s: float | None = 30.0, aggregate: Literal["mean", "sum"] = "mean") -> None:
        self.components: tuple[Component, ...] = tuple(components)
        self.name, self.version, self.timeout_s, self.aggregate = name, version, timeout_s, aggregate
        names = [c.name for c in self.components]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise GraderSpecError(f"rubric {name!r}: duplicate component names {dupes}")
        if aggregate not in ("mean", "sum"):
            raise GraderSpecError(f"aggregate must be 'mean' or 'sum', got {aggregate!r}")
        if not any(c.weight > 0 for c in self.components):
            raise GraderSpecError(f"rubric {name!r} has no component with weight > 0: nothing to reward")

    @property
    def grader(self) -> str:
        return f"{self.name}@{self.version}"

    def describe(self) -> dict[str, Any]:
        """Name, version and every component's settings: what a rollout contract records."""
        return {"name": self.name, "version": self.version, "aggregate": self.aggregate,
                "components": {c.name: {"weight": c.weight, "gate": c.gate, "scale": list(c.scale),
                                        "pass_at": c.pass_at, "version": c.version,
                                        "grader": getattr(c.fn, "describe", lambda: None)()}
                               for c in self.components}}

    def __call__(self, trace: Trace | Sequence[Any], runtime: Any = None) -> Verdict:
        return self.score(trace, runtime)

    def score(self, trace: Trace | Sequence[Any], runtime: Any = None) -> Verdict:
        """Run every component (concurrently, each within its timeout) and combine them."""
        trace = Trace.coerce(trace)
        limits = [c.timeout_s if c.timeout_s is not None else self.timeout_s for c in self.components]
        futures = {c.name: _WORKERS.submit(c.fn, trace, runtime)
                   for c, limit in zip(self.components, limits, strict=True) if limit is not None}
        start = time.monotonic()
        scores: dict[str, float] = {}
        errors: dict[str, str] = {}
        reasons: dict[str, str] = {}  # a scored component's note on its score (why a 0)
        for c, limit in zip(self.components, limits, strict=True):
            try:
                if limit is None:
                    raw = c.fn(trace, runtime)
                else:
                    raw = futures[c.name].result(timeout=max(0.0, start + limit - time.monotonic()))
            except (cf.TimeoutError, TimeoutError) as exc:
                future = futures.get(c.name)
                hung = future is not None and not future.done()  # else the component raised it
                errors[c.name] = (f"timed out after {limit:g} s (abandoned)" if hung
                                  else describe_exception(exc))
                continue
            except Exception as exc:  # recorded on this component only; siblings go on
                errors[c.name] = describe_exception(exc)
                continue
            try:
                scores[c.name] = c.normalise(raw)
            except ValueError as exc:  # the component returned something unusable
                errors[c.name] = str(exc)
            else:
                if isinstance(raw, Verdict) and raw.error:
                    reasons[c.name] = raw.error
        return self._combine(scores, errors, reasons)

    def _combine(self, scores: Mapping[str, float], errors: Mapping[str, str],
                 reasons: Mapping[str, str] | None = None) -> Verdict:
        components = {c.name: scores[c.name] for c in self.components if c.weight > 0 and c.name in scores}
        metrics = {c.name: scores[c.name] for c in self.components if c.weight == 0 and c.name in scores}
        blocking = [c.name for c in self.components if c.name in errors and (c.weight > 0 or c.gate)]
        if blocking:
            reason = "; ".join(f"{n}: {errors[n]}" for n in blocking)
            return Verdict(0.0, components, metrics, "error", f"rubric components failed: {reason}",
                           self.grader, dict(errors))
        failed = [c.name for c in self.components if c.gate and scores[c.name] < c.pass_at]
        weighted = [(c.weight, scores[c.name]) for c in self.components if c.weight > 0]
        total = sum(w * s for w, s in weighted)
        reward = total / sum(w for w, _ in weighted) if self.aggregate == "mean" else total
        note = "; ".join(f"{n}: {r}" for n, r in (reasons or {}).items()) or None
        return Verdict(0.0 if failed else reward, components, metrics, "scored", note, self.grader,
                       dict(errors), failed)


@dataclass
class MultiRubric:
    """Several rubrics over one trajectory (rules, an LLM judge, ...), each recorded separately.

    The reward comes from ``primary``; every other rubric's reward, components and errors are kept
    in the verdict's metrics and errors under ``"<rubric>/..."``. :meth:`score_all` returns each
    rubric's own full :class:`Verdict`.
    """

    rubrics: Sequence[Rubric]
    primary: str | None = None
    _by_name: dict[str, Rubric] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._by_name = {r.name: r for r in self.rubrics}
        if len(self._by_name) != len(self.rubrics):
            raise GraderSpecError("rubrics in a MultiRubric need distinct names")
        self.primary = self.primary or self.rubrics[0].name
        if self.primary not in self._by_name:
            raise GraderSpecError(f"primary rubric {self.primary!r} is not one of {list(self._by_name)}")

    def score_all(self, trace: Trace | Sequence[Any], runtime: Any = None) -> dict[str, Verdict]:
        return score_all(self.rubrics, trace, runtime)

    def __call__(self, trace: Trace | Sequence[Any], runtime: Any = None) -> Verdict:
        verdicts = self.score_all(trace, runtime)
        main = verdicts[self.primary]  # type: ignore[index]
        metrics, errors = dict(main.metrics), dict(main.errors)
        for name, v in verdicts.items():
            if name == self.primary:
                continue
            if v.scored:
                metrics[f"{name}/reward"] = v.reward
            for key, value in {**v.components, **v.metrics}.items():
                metrics[f"{name}/{key}"] = value
            for key, value in v.errors.items():
                errors[f"{name}/{key}"] = value
            if v.status == "error" and not v.errors:
                errors[name] = v.error or "failed"
        return Verdict(main.reward, dict(main.components), metrics, main.status, main.error,
                       main.grader, errors, list(main.failed_gates))


def score_all(rubrics: Iterable[Rubric], trace: Trace | Sequence[Any], runtime: Any = None,
              ) -> dict[str, Verdict]:
    """Each rubric's verdict on one trajectory, by rubric name (they run one after another; the
    components inside each run concurrently)."""
    return {r.name: r.score(trace, runtime) for r in rubrics}
