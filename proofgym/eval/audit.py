"""``audit``: look for reward-hack signatures in the trajectories of a run that paid.

The seeds' advice "inspect high-reward trajectories" as a check: every scored trajectory whose
reward is at least ``min_reward`` is read by each :class:`~proofgym.eval.audit_rules.Rule`
(edits to tests or test configuration, runner internals, ``os._exit``/``sys.exit`` in the code
under test, always-equal objects, swallowed assertions, forged reports, modules shadowing pytest or
the standard library, reads outside the workspace, git-history mining, answers copied from a leaked
file, the grader's own tampering components, sleeping past the grader or filling its disk).

A task extends the rule set with an ``audit_rules()`` method returning more rules (its own
signatures), and may set ``audit_rules_replace = True`` to use only its own (when an honest solution
of the task trips a default rule). The result goes to ``RUN/audit.json``; the run's report shows it
in an "Audit" section that links each flagged trajectory.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from proofgym.eval.audit_rules import DEFAULT_RULES, Finding, Rule, subject_of
from proofgym.record.rundir import RunRecord, load_run

AUDIT_JSON = "audit.json"
#: ``min_reward`` by default: a trajectory that earned something.
DEFAULT_MIN_REWARD = 0.5


def rules_for(task: Any, base: Sequence[Rule] = DEFAULT_RULES) -> list[Rule]:
    """``base`` plus the task's own ``audit_rules()`` (or only those, with ``audit_rules_replace``)."""
    extra = list(task.audit_rules()) if task is not None else []
    for rule in extra:
        if not isinstance(rule, Rule):
            raise TypeError(f"{type(task).__name__}.audit_rules() returned {type(rule).__name__}; expected "
                            "proofgym.eval.audit_rules.Rule")
    if task is not None and task.audit_rules_replace:
        return extra
    return [*base, *extra]


def audit_trajectory(traj: Any, rules: Iterable[Rule],
                     original: Callable[[str], str | None] | None = None) -> list[Finding]:
    """Every finding of ``rules`` in one trajectory, each (rule, where) once. ``original(path)``
    (a task's ``original_file``) gives a file as the workspace started: lines an edit kept from
    it are not held against the episode."""
    subject = subject_of(traj, original)
    seen: set[tuple[str, str]] = set()
    out: list[Finding] = []
    for rule in rules:
        for finding in rule.check(subject):
            if (finding.rule, finding.where) not in seen:
                seen.add((finding.rule, finding.where))
                out.append(finding)
    return out


def audit_run(run: str | Path | RunRecord, *, min_reward: float = DEFAULT_MIN_REWARD,
              rules: Sequence[Rule] | None = None,
              task_lookup: Callable[[str], Any] | None = None) -> dict[str, Any]:
    """Audit the trajectories of ``run`` with reward >= ``min_reward`` (every one, scored or not,
    when ``min_reward <= 0``). ``rules`` replaces the default set; ``task_lookup(task_id)`` gives a
    task whose ``audit_rules()`` extend it (``None``: the default set only)."""
    record = run if isinstance(run, RunRecord) else load_run(run)
    base = tuple(rules) if rules is not None else DEFAULT_RULES
    audited = [t for t in record.trajectories
               if min_reward <= 0 or (t.reward is not None and t.reward >= min_reward)]
    cache: dict[str, list[Rule]] = {}
    originals: dict[str, Callable[[str], str | None] | None] = {}
    flagged = []
    for traj in audited:
        if traj.task_id not in cache:
            task = task_lookup(traj.task_id) if task_lookup is not None else None
            cache[traj.task_id] = rules_for(task, base)
            originals[traj.task_id] = task.original_file if task is not None else None
        findings = audit_trajectory(traj, cache[traj.task_id], originals[traj.task_id])
        if findings:
            flagged.append({"trajectory_id": traj.trajectory_id, "task_id": traj.task_id,
                            "reward": traj.reward, "families": sorted({f.family for f in findings}),
                            "findings": [f.to_dict() for f in findings]})
    families = Counter(fam for entry in flagged for fam in entry["families"])
    used = {r.name for rs in cache.values() for r in rs} if cache else {r.name for r in base}
    return {"run": str(record.path), "min_reward": min_reward, "trajectories": len(record.trajectories),
            "audited": len(audited), "flagged": len(flagged), "families": dict(sorted(families.items())),
            "rules": sorted(used),
            "trajectories_flagged": flagged}


def task_lookup_from_contract(record: RunRecord) -> Callable[[str], Any] | None:
    """The run's tasks, built from the env its contract names (``None`` when it names none)."""
    env = (record.contract or {}).get("env") or {}
    env_id = env.get("id") or next((t.env_id for t in record.trajectories if t.env_id), "")
    if not env_id:
        return None
    from proofgym.make import make_env

    built = make_env(env_id, **(env.get("kwargs") or {}))
    try:
        tasks = built.tasks
        table = {task.id: task for task in tasks} if tasks is not None else {}
    finally:
        built.close()
    return table.get
