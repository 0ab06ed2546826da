"""Curating a task manifest after the fact (``proofgym tasks curate``): drop the tasks a
``grep`` finds (:mod:`proofgym.tasks.synth.tells`), those whose failure names a variable the
patch deleted, and tier-2 tasks whose bugs are in different modules; rewrite the remaining
reports with the offline writer from what the record keeps. Re-runnable: a curated manifest
comes out unchanged."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from proofgym.tasks.synth.manifest import TaskRecord
from proofgym.tasks.synth.statements import BugEvidence, Failure, OfflineWriter
from proofgym.tasks.synth.tells import ProjectSource, names_a_removed_name, tells_of

# a line of the template reports written before the statement writer: "- `name` (in `Cls`):
# words; fails with Exc: message"
_TEMPLATE_LINE = re.compile(r"^- `(?P<name>[^`]+)`(?: \(in `[^`]+`\))?: .*?; fails with "
                            r"(?P<exc>[\w.]+|an error|a wrong result)(?:: (?P<msg>.*))?$")
_PASSING = re.compile(r"while (\d+) others still pass")


def failures_from_report(record: TaskRecord) -> list[Failure] | None:
    """The failures a template report lists (exception and first message line), or ``None``
    when the report is not one of those."""
    by_name = {n.rsplit("::", 1)[-1]: n for n in record.fail_to_pass}
    out = []
    for line in record.bug_report.splitlines():
        m = _TEMPLATE_LINE.match(line)
        if m and m.group("name") in by_name:
            exc = m.group("exc") if m.group("exc")[:1].isupper() else None
            out.append(Failure(by_name[m.group("name")], exc, m.group("msg")))
    return out if len(out) == len(record.fail_to_pass) else None


def one_module(record: TaskRecord) -> bool:
    """Whether every bug of ``record`` is in one file (a tier-2 task describes one feature)."""
    return len({str(b["file"]) for b in record.bugs}) == 1


def rewrite_statement(record: TaskRecord) -> TaskRecord:
    """``record`` with its template report rewritten by the offline writer (a report that is
    not a template is kept)."""
    failures = failures_from_report(record)
    if failures is None:
        return record
    m = _PASSING.search(record.bug_report)
    passing = int(m.group(1)) if m else len(record.pass_to_pass)
    statement = OfflineWriter().write(BugEvidence(record.project, record.patch, record.bugs,
                                                  failures, passing))
    provenance = {**record.provenance, **statement.provenance}
    provenance["statement"] = {**provenance["statement"],
                               "from": "the failures' exception types and messages kept in the "
                                       "earlier report (the record keeps no assertion values)"}
    return replace(record, title=statement.title, bug_report=statement.report, provenance=provenance)


@dataclass
class Curation:
    kept: list[TaskRecord] = field(default_factory=list)
    dropped: dict[str, list[str]] = field(default_factory=dict)  # reason -> task ids

    def summary(self) -> str:
        reasons = ", ".join(f"{len(v)} {k}" for k, v in sorted(self.dropped.items())) or "none"
        projects = len({r.project for r in self.kept})
        return f"kept {len(self.kept)} tasks from {projects} projects; dropped: {reasons}"


def curate(records: Sequence[TaskRecord], source_of: Callable[[str], ProjectSource]) -> Curation:
    """Apply the module docstring's rules to ``records``; ``source_of(project)`` gives a
    project's pristine source (for the tell check)."""
    out = Curation()
    sources: dict[str, ProjectSource] = {}
    for record in records:
        failures = failures_from_report(record) or []
        if record.tier > 1 and not one_module(record):
            out.dropped.setdefault("tier2_across_modules", []).append(record.id)
            continue
        if names_a_removed_name(record.patch, failures):
            out.dropped.setdefault("name_error_of_removed_name", []).append(record.id)
            continue
        if record.project not in sources:
            sources[record.project] = source_of(record.project)
        if tells_of(record, sources[record.project]):
            out.dropped.setdefault("tell", []).append(record.id)
            continue
        out.kept.append(rewrite_statement(record))
    return out
