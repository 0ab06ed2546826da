"""``compare``: is run B really better than run A on the same tasks?

Runs are read through the one run-directory reader. Their contracts are diffed first: runs whose
tasks, graders, limits or environment differ answer different questions, and are refused unless
the caller allows it (or a parity file declares the difference). Episodes are then paired by task
(and attempt): the mean-reward and pass@k differences get a paired bootstrap interval over tasks,
pass/fail gets McNemar's exact test over (task, attempt) pairs, and every task is a win, tie or
loss for B. Cost sits next to quality: tokens, model and tool time, episodes per second and, when
the policy reported prices, cost per solved task.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from proofgym.core.errors import ComparisonError as ComparisonError
from proofgym.eval.compare_stats import mcnemar_exact, paired_bootstrap, win_tie_loss
from proofgym.eval.metrics import PASS_THRESHOLD, end_reason, pass_at_k, summary_of
from proofgym.record import Trajectory
from proofgym.record.contract import ContractError, RolloutContract, apply_parity, diff_contracts, load_parity
from proofgym.record.rundir import RunRecord, load_run, split_of

COMPARE_JSON = "compare.json"

#: Contract categories whose difference makes two runs answer different questions.
BLOCKING = ("env", "tasks", "limits", "verifiers")
#: Categories that differ by design between the runs being compared (that is the comparison).
EXPECTED = ("policy", "proofgym")

#: ``--by`` keys read from the episode itself rather than from task metadata.
BUILTIN_KEYS = ("split", "end_reason")


MetadataLookup = Callable[[str], Mapping[str, Any]]


def compare(runs: Sequence[str | Path | RunRecord], *, by: Sequence[str] = (),
            allow_differences: bool = False, parity: str | Path | None = None,
            threshold: float = PASS_THRESHOLD, confidence: float = 0.95, seed: int = 0,
            metadata: MetadataLookup | None = None, labels: Sequence[str] | None = None) -> dict[str, Any]:
    """Compare two or more runs, every pair ``(A, B)`` in the order given (B minus A).

    ``by`` names breakdown keys: ``split``, ``end_reason`` or any task metadata key, read from
    ``metadata(task_id)`` (default: the task set of the environment in run A's contract).
    Raises :class:`ComparisonError` when contracts differ in a blocking category (tasks, graders,
    limits, env) and neither ``allow_differences`` nor a ``parity`` rule allows it, or when two
    runs share no scored task. Returns a JSON-ready dict (the body of ``compare.json``).
    """
    if len(runs) < 2:
        raise ComparisonError(f"compare needs at least two runs, got {len(runs)}")
    records = [r if isinstance(r, RunRecord) else load_run(r) for r in runs]
    names = list(labels) if labels else _labels(records)
    if len(names) != len(records):
        raise ComparisonError(f"{len(names)} labels for {len(records)} runs")
    rules = load_parity(parity) if parity is not None else []
    warnings: list[str] = []
    checks = []
    for (i, ra), (j, rb) in itertools.combinations(enumerate(records), 2):
        check = _contract_check(ra, rb, rules, names[i], names[j])
        checks.append(check)
        warnings.extend(check["warnings"])
        if check["blocking"] and allow_differences:
            warnings.append(f"{names[i]} vs {names[j]}: compared although their contracts differ in "
                            + ", ".join(d["path"] for d in check["blocking"][:6]) + " (--allow-differences)")
        elif check["blocking"]:
            shown = "; ".join(f"{d['path']}: {d['a']!r} -> {d['b']!r}" for d in check["blocking"][:6])
            raise ComparisonError(
                f"{names[i]} and {names[j]} are not comparable: their contracts differ in "
                f"{', '.join(sorted({d['category'] for d in check['blocking']}))} ({shown}). Compare "
                "runs of the same tasks, graders and limits; or pass --allow-differences (or a "
                "--parity file declaring each difference with its reason) to compare anyway")
    lookup = metadata if metadata is not None else _metadata_from_contract(records[0], by, warnings)
    pairs = [_compare_pair(records[i], records[j], names[i], names[j], by=by, threshold=threshold,
                           confidence=confidence, seed=seed, metadata=lookup, warnings=warnings)
             for i, j in itertools.combinations(range(len(records)), 2)]
    return {"runs": [_run_facts(r, n, threshold) for r, n in zip(records, names, strict=True)],
            "contracts": checks, "pairs": pairs, "by": list(by), "pass_threshold": threshold,
            "confidence": confidence, "seed": seed, "warnings": warnings}


def _labels(records: Sequence[RunRecord]) -> list[str]:
    names = [r.path.name or str(r.path) for r in records]
    if len(set(names)) == len(names):
        return names
    return [str(r.path) for r in records]


# ----------------------------------------------------------------- contracts
def _contract_check(ra: RunRecord, rb: RunRecord, rules: list, na: str, nb: str) -> dict[str, Any]:
    out: dict[str, Any] = {"a": na, "b": nb, "contract_a": None, "contract_b": None,
                           "differences": [], "blocking": [], "warnings": []}
    if ra.contract is None or rb.contract is None:
        missing = [n for n, r in ((na, ra), (nb, rb)) if r.contract is None]
        out["warnings"].append(f"{', '.join(missing)} has no contract.json: the runs' settings cannot be "
                               "checked; tasks are still paired by id and content hash")
    else:
        try:
            ca, cb = RolloutContract.from_dict(ra.contract), RolloutContract.from_dict(rb.contract)
        except ContractError as exc:
            raise ComparisonError(f"cannot read a contract ({na} vs {nb}): {exc}") from None
        out["contract_a"], out["contract_b"] = ca.id, cb.id
        for d in apply_parity(diff_contracts(ca, cb), rules):
            blocking = d.category in BLOCKING and not d.allowed
            row = {"category": d.category, "path": d.path, "a": d.a, "b": d.b, "reason": d.reason,
                   "blocking": blocking}
            out["differences"].append(row)
            if blocking:
                out["blocking"].append(row)
        unexpected = [d for d in out["differences"]
                      if not d["blocking"] and d["category"] not in EXPECTED and d["reason"] is None]
        if unexpected:
            out["warnings"].append(f"{na} vs {nb}: contracts also differ in "
                                   + ", ".join(d["path"] for d in unexpected[:6])
                                   + (" ..." if len(unexpected) > 6 else ""))
    hashes_a = {t.task_id: t.task_hash for t in ra.trajectories}
    changed = sorted(t.task_id for t in rb.trajectories
                     if t.task_id in hashes_a and hashes_a[t.task_id] != t.task_hash)
    if changed:
        row = {"category": "tasks", "path": "task_hash", "a": f"{len(set(changed))} task(s)",
               "b": f"e.g. {changed[0]}", "reason": None, "blocking": True}
        out["differences"].append(row)
        out["blocking"].append(row)
    return out


def _metadata_from_contract(run: RunRecord, by: Sequence[str], warnings: list[str]) -> MetadataLookup:
    """Task metadata from the environment named in the run's contract (only built when a
    ``--by`` key needs it: building an env can be slow)."""
    if not [k for k in by if k not in BUILTIN_KEYS]:
        return lambda task_id: {}
    env_id = ((run.contract or {}).get("env") or {}).get("id") or next(
        (t.env_id for t in run.trajectories if t.env_id), "")
    kwargs = ((run.contract or {}).get("env") or {}).get("kwargs") or {}
    if not env_id:
        raise ComparisonError(f"--by {', '.join(by)}: {run.path} records no environment id to read task "
                              "metadata from; pass metadata=... from Python")
    from proofgym.make import make_env

    env = make_env(env_id, **kwargs)
    try:
        tasks = env.tasks
        if tasks is None:
            raise ComparisonError(f"--by: {env_id} has no task set to read task metadata from")
        table = {task.id: dict(task.get_spec().metadata or {}) for task in tasks}
    finally:
        env.close()
    return lambda task_id: table.get(task_id, {})


# ----------------------------------------------------------------- pairing
def _by_task(trajs: Sequence[Trajectory]) -> dict[str, dict[int, Trajectory]]:
    """task id -> attempt index -> the episode (infrastructure errors included: they are
    unscored, and a task counts only where both runs have a scored attempt)."""
    out: dict[str, dict[int, Trajectory]] = defaultdict(dict)
    counters: Counter[str] = Counter()
    for t in trajs:
        attempt = t.extra.get("attempt")
        if not isinstance(attempt, int):
            attempt = counters[t.task_id]
        counters[t.task_id] += 1
        out[t.task_id][attempt] = t
    return out


def _task_value(attempts: Mapping[int, Trajectory]) -> list[float]:
    return [t.reward for _, t in sorted(attempts.items()) if t.reward is not None]


def _compare_pair(ra: RunRecord, rb: RunRecord, na: str, nb: str, *, by: Sequence[str],
                  threshold: float, confidence: float, seed: int, metadata: MetadataLookup,
                  warnings: list[str]) -> dict[str, Any]:
    ta, tb = _by_task(ra.trajectories), _by_task(rb.trajectories)
    common = [t for t in ta if t in tb and _task_value(ta[t]) and _task_value(tb[t])]
    if not common:
        raise ComparisonError(f"{na} and {nb} share no task with a scored episode in both; compare runs "
                              "of the same task set (same env, split and seeds)")
    only_a = sorted(set(ta) - set(tb))
    only_b = sorted(set(tb) - set(ta))
    if only_a or only_b:
        warnings.append(f"{na} vs {nb}: {len(only_a)} task(s) only in {na}, {len(only_b)} only in {nb}; "
                        f"compared on the {len(common)} shared task(s)")
    rows = []
    episode_pairs: list[tuple[Trajectory, Trajectory]] = []
    for task_id in common:
        ra_, rb_ = _task_value(ta[task_id]), _task_value(tb[task_id])
        row = {"task_id": task_id, "a": sum(ra_) / len(ra_), "b": sum(rb_) / len(rb_),
               "a_attempts": len(ra_), "b_attempts": len(rb_),
               "a_pass_rate": sum(r >= threshold for r in ra_) / len(ra_),
               "b_pass_rate": sum(r >= threshold for r in rb_) / len(rb_)}
        row["delta"] = row["b"] - row["a"]
        row["a_solved"], row["b_solved"] = row["a_pass_rate"] > 0.5, row["b_pass_rate"] > 0.5
        rows.append(row)
        for attempt in sorted(set(ta[task_id]) & set(tb[task_id])):
            x, y = ta[task_id][attempt], tb[task_id][attempt]
            if x.reward is not None and y.reward is not None:
                episode_pairs.append((x, y))
    result = _quality(rows, episode_pairs, threshold, confidence, seed)
    result.update(a=na, b=nb, only_a=only_a, only_b=only_b, per_task=rows)
    result["pass_at_k"] = _pass_at_k(ta, tb, common, threshold, confidence, seed)
    result["breakdown"] = {key: _breakdown(key, rows, episode_pairs, ta, tb, metadata, threshold,
                                           confidence, seed) for key in by}
    return result


def _quality(rows: list[dict[str, Any]], episode_pairs: list[tuple[Trajectory, Trajectory]],
             threshold: float, confidence: float, seed: int) -> dict[str, Any]:
    a = [r["a"] for r in rows]
    b = [r["b"] for r in rows]
    diff = paired_bootstrap(a, b, confidence=confidence, seed=seed)
    test = mcnemar_exact([x.reward >= threshold for x, _ in episode_pairs],  # type: ignore[operator]
                         [y.reward >= threshold for _, y in episode_pairs])  # type: ignore[operator]
    return {"tasks": len(rows), "episode_pairs": len(episode_pairs), "mean_reward": diff.to_dict(),
            "mcnemar": test.to_dict(), "win_tie_loss": win_tie_loss(a, b),
            "flipped": {"fixed": [r["task_id"] for r in rows if r["b_solved"] and not r["a_solved"]],
                        "broken": [r["task_id"] for r in rows if r["a_solved"] and not r["b_solved"]]}}


def _pass_at_k(ta: Mapping[str, Mapping[int, Trajectory]], tb: Mapping[str, Mapping[int, Trajectory]],
               common: Sequence[str], threshold: float, confidence: float, seed: int) -> dict[str, Any]:
    """pass@k per k, paired over the tasks with at least k scored attempts in both runs."""
    counts = {t: ((len(_task_value(ta[t])), sum(r >= threshold for r in _task_value(ta[t]))),
                  (len(_task_value(tb[t])), sum(r >= threshold for r in _task_value(tb[t]))))
              for t in common}
    k_max = max((min(na, nb) for (na, _), (nb, _) in counts.values()), default=0)
    out = {}
    for k in range(1, k_max + 1):
        tasks = [c for c in counts.values() if c[0][0] >= k and c[1][0] >= k]
        out[str(k)] = paired_bootstrap([pass_at_k(n, c, k) for (n, c), _ in tasks],
                                       [pass_at_k(n, c, k) for _, (n, c) in tasks],
                                       confidence=confidence, seed=seed).to_dict()
    return out


def _breakdown(key: str, rows: list[dict[str, Any]], episode_pairs: list[tuple[Trajectory, Trajectory]],
               ta: Mapping[str, Mapping[int, Trajectory]], tb: Mapping[str, Mapping[int, Trajectory]],
               metadata: MetadataLookup, threshold: float, confidence: float,
               seed: int) -> list[dict[str, Any]]:
    """The pair's numbers within each value of ``key``. ``end_reason`` groups episode pairs by how
    each side ended (``terminated -> truncated:turns``); other keys group tasks."""
    groups: dict[str, tuple[list[dict[str, Any]], list[tuple[Trajectory, Trajectory]]]] = {}
    if key == "end_reason":
        for x, y in episode_pairs:
            value = f"{end_reason(x)} -> {end_reason(y)}"
            pair_rows, pairs = groups.setdefault(value, ([], []))
            pairs.append((x, y))
            pair_rows.append({"a": x.reward, "b": y.reward})
        # unscored episodes (errors) have no pair; count them so they are not invisible
        errors = Counter(f"{end_reason(t)} (unscored, {side})" for side, table in (("A", ta), ("B", tb))
                         for attempts in table.values() for t in attempts.values() if t.reward is None)
        for value, n in errors.items():
            groups[value] = ([], [])
            groups[value][0].extend({"a": None, "b": None} for _ in range(n))
    else:
        if key != "split" and rows and all(
                metadata(r["task_id"]).get(key, _extra_value(ta[r["task_id"]], key)) is None for r in rows):
            known = sorted({k for r in rows for k in metadata(r["task_id"])})
            raise ComparisonError(f"--by {key}: no task of these runs has a metadata key {key!r}; use "
                                  f"split, end_reason or one of: {', '.join(known) or '(none: no metadata)'}")
        for row in rows:
            tid = row["task_id"]
            if key == "split":
                first = next(iter(ta[tid].values()))
                value = split_of(first) or "unknown"
            else:
                value = metadata(tid).get(key, _extra_value(ta[tid], key))
            value = "missing" if value is None else str(value)
            group_rows, pairs = groups.setdefault(value, ([], []))
            group_rows.append(row)
            pairs.extend(p for p in episode_pairs if p[0].task_id == tid)
    out = []
    for value in sorted(groups):
        group_rows, pairs = groups[value]
        scored = [r for r in group_rows if r["a"] is not None]
        entry: dict[str, Any] = {"value": value, "count": len(group_rows)}
        if scored:
            entry.update(_quality_small(scored, pairs, threshold, confidence, seed))
        out.append(entry)
    return out


def _quality_small(rows: list[dict[str, Any]], pairs: list[tuple[Trajectory, Trajectory]], threshold: float,
                   confidence: float, seed: int) -> dict[str, Any]:
    a = [r["a"] for r in rows]
    b = [r["b"] for r in rows]
    return {"mean_reward": paired_bootstrap(a, b, confidence=confidence, seed=seed).to_dict(),
            "win_tie_loss": win_tie_loss(a, b),
            "mcnemar": mcnemar_exact([x.reward >= threshold for x, _ in pairs],  # type: ignore[operator]
                                     [y.reward >= threshold for _, y in pairs]).to_dict()}  # type: ignore[operator]


def _extra_value(attempts: Mapping[int, Trajectory], key: str) -> Any:
    first = next(iter(attempts.values()))
    meta = first.extra.get("metadata")
    if isinstance(meta, Mapping) and key in meta:
        return meta[key]
    return first.extra.get(key)


# ----------------------------------------------------------------- cost
def _run_facts(run: RunRecord, name: str, threshold: float) -> dict[str, Any]:
    trajs = run.trajectories
    summary = summary_of(run)  # the run's numbers as `report` shows them
    scored = [t.reward for t in trajs if t.reward is not None]
    time = summary["time"]
    solved_tasks = len({t.task_id for t in trajs if t.reward is not None and t.reward >= threshold})
    cost = _cost(trajs)
    wall = summary.get("wall_s") or summary.get("elapsed_s")
    return {
        "label": name, "path": str(run.path),
        "policy": summary.get("policy") or (trajs[0].policy if trajs else None),
        "contract_id": (run.contract or {}).get("contract_id"),
        "episodes": summary["episodes"], "scored": summary["scored"], "tasks": summary["tasks"],
        "mean_reward": summary["mean_reward"],
        "pass_rate": sum(r >= threshold for r in scored) / len(scored) if scored else None,
        "solved_tasks": solved_tasks,
        "end_reasons": dict(sorted(Counter(end_reason(t) for t in trajs).items())),
        "tokens": summary["tokens"],
        "model_s": time["policy_s"], "tool_s": time["env_s"], "verify_s": time["verify_s"],
        "episode_s": time["total_s"],
        # wall time is recorded by newer runs; without it, throughput per episode-second of one slot
        "episodes_per_s": (len(trajs) / wall if isinstance(wall, (int, float)) and wall > 0
                           else len(trajs) / time["total_s"] if time["total_s"] > 0 else None),
        "episodes_per_s_basis": "wall time" if isinstance(wall, (int, float)) and wall > 0
        else "summed episode time",
        "cost": cost,
        "cost_per_solved_task": cost / solved_tasks if cost is not None and solved_tasks else None,
    }


def _cost(trajs: Sequence[Trajectory]) -> float | None:
    """Cost the policy reported (``usage["cost"]`` per step, or ``extra["cost"]`` per episode);
    ``None`` when nothing reported a price: an unpriced run is not a free one."""
    total = 0.0
    seen = False
    for t in trajs:
        value = t.extra.get("cost")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            total += float(value)
            seen = True
            continue
        for s in t.steps:
            value = s.usage.get("cost") if s.usage else None
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                total += float(value)
                seen = True
    return total if seen else None
