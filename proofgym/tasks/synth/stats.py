"""The distribution report of a synthesised task set: per project and per origin (seeded
operator or release history), per operator, per tier, the fail-to-pass count histogram, the
validation rate and the median grading time."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from proofgym.tasks.synth.manifest import SYNTHETIC, TaskRecord


def origin_kind(record: TaskRecord) -> str:
    """``"synthetic operator"`` or ``"release history"`` (every ``release a->b`` origin)."""
    return SYNTHETIC if record.origin == SYNTHETIC else "release history"


def distribution(records: Sequence[TaskRecord],
                 synth_reports: Mapping[str, Mapping[str, Any]] | None = None,
                 splits: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The report as a dict. ``synth_reports`` (per project, :class:`ProjectReport.to_dict`)
    gives the candidates tried and the validation rate; ``splits`` maps task ids to splits."""
    synth_reports = synth_reports or {}
    projects: dict[str, dict[str, Any]] = {}
    for name in sorted({r.project for r in records} | set(synth_reports)):
        mine = [r for r in records if r.project == name]
        info = synth_reports.get(name, {})
        tried = int(info.get("tried", 0))
        grading = [float(r.stats["grading_s"]) for r in mine if "grading_s" in r.stats]
        projects[name] = {
            "tasks": len(mine),
            "release_history": sum(origin_kind(r) != SYNTHETIC for r in mine),
            "tier1": sum(r.tier == 1 for r in mine), "tier2": sum(r.tier == 2 for r in mine),
            "stable_tests": info.get("stable_tests"),
            "candidates_tried": tried,
            "validation_rate": round(info["kept"] / tried, 3) if tried and "kept" in info else None,
            "median_grading_s": round(statistics.median(grading), 2) if grading else None,
            "synthesis_s": info.get("seconds"),
        }
    operators = Counter(op for r in records for op in r.operators)
    origins: dict[str, dict[str, Any]] = {}
    for kind in sorted({origin_kind(r) for r in records}, key=lambda k: k != SYNTHETIC):
        mine = [r for r in records if origin_kind(r) == kind]
        origins[kind] = {
            "tasks": len(mine), "projects": len({r.project for r in mine}),
            # the report is the project's own changelog entry (release history only)
            "changelog_reports": sum(
                (r.provenance.get("statement") or {}).get("writer") == "changelog" for r in mine),
        }
    tiers = Counter(r.tier for r in records)
    f2p = Counter(len(r.fail_to_pass) for r in records)
    grading = [float(r.stats["grading_s"]) for r in records if "grading_s" in r.stats]
    cpu = [float(r.stats["grading_cpu_s"]) for r in records if "grading_cpu_s" in r.stats]
    tried = sum(int(v.get("tried", 0)) for v in synth_reports.values())
    kept = sum(int(v.get("kept", 0)) for v in synth_reports.values())
    seconds = sum(float(v.get("seconds", 0.0)) for v in synth_reports.values())
    return {
        "tasks": len(records),
        "projects": projects,
        "origins": origins,
        "operators": dict(sorted(operators.items())),
        "tiers": {str(k): v for k, v in sorted(tiers.items())},
        "fail_to_pass_histogram": {str(k): v for k, v in sorted(f2p.items())},
        "splits": dict(sorted(Counter(splits.get(r.id, "?") for r in records).items())) if splits else {},
        "candidates_tried": tried,
        "validation_rate": round(kept / tried, 3) if tried else None,
        "candidates_per_minute": round(tried / (seconds / 60), 1) if seconds else None,
        "median_grading_s": round(statistics.median(grading), 2) if grading else None,
        "median_grading_cpu_s": round(statistics.median(cpu), 2) if cpu else None,
    }


def format_report(report: Mapping[str, Any]) -> str:
    """The report as Markdown tables (what ``proofgym tasks stats`` prints)."""
    lines = [f"# RepoRepair task distribution: {report['tasks']} tasks, "
             f"{len([p for p in report['projects'].values() if p['tasks']])} projects", ""]
    lines += ["| project | tasks | from release history | tier 1 | tier 2 | stable tests | tried | "
              "validation rate | median grading s |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, p in report["projects"].items():
        rate = "" if p["validation_rate"] is None else f"{p['validation_rate']:.0%}"
        lines.append(f"| {name} | {p['tasks']} | {p['release_history']} | {p['tier1']} | {p['tier2']} | "
                     f"{p['stable_tests'] if p['stable_tests'] is not None else ''} | "
                     f"{p['candidates_tried']} | {rate} | "
                     f"{p['median_grading_s'] if p['median_grading_s'] is not None else ''} |")
    lines += ["", "| origin | tasks | projects | changelog reports |", "|---|---:|---:|---:|"]
    lines += [f"| {k} | {v['tasks']} | {v['projects']} | {v['changelog_reports']} |"
              for k, v in report["origins"].items()]
    lines += ["", "| operator | tasks |", "|---|---:|"]
    lines += [f"| {k} | {v} |" for k, v in report["operators"].items()]
    lines += ["", "| tier | tasks |", "|---|---:|"]
    lines += [f"| {k} | {v} |" for k, v in report["tiers"].items()]
    lines += ["", "| fail-to-pass tests | tasks |", "|---:|---:|"]
    lines += [f"| {k} | {v} |" for k, v in report["fail_to_pass_histogram"].items()]
    if report.get("splits"):
        lines += ["", "| split | tasks |", "|---|---:|"]
        lines += [f"| {k} | {v} |" for k, v in report["splits"].items()]
    if report.get("tells"):
        tells = report["tells"]
        lines += ["", f"Tell rate (a grep for the operator's signature finds the bug among at most "
                      f"3 hits): {tells['rate']:.1%} of {tells['tasks']} tasks", "",
                  "| operator | tasks | tells | tell rate |", "|---|---:|---:|---:|"]
        lines += [f"| {k} | {v['tasks']} | {v['tells']} | {v['rate']:.1%} |"
                  for k, v in tells["operators"].items()]
    rate = report["validation_rate"]
    lines += ["", f"Candidates tried: {report['candidates_tried']}; validation rate: "
              f"{'' if rate is None else f'{rate:.0%}'}; candidates per minute: "
              f"{report['candidates_per_minute']}; median grading time: "
              f"{report['median_grading_s']} s (wall; CPU {report['median_grading_cpu_s']} s) "
              "for the reference's grading."]
    return "\n".join(lines) + "\n"
