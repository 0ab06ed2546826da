"""Re-deriving a manifest's written statements (``proofgym tasks restate``).

For each task whose report is a written statement (not a project's changelog entry), the
task's failing tests run on its buggy source, in one sandbox per project (the synthesis
screening run, :class:`~proofgym.tasks.synth.testrun.SuiteRunner`, watching the bug's
functions), and the offline writer writes the report from what they observed: the values, the
exception, the call that reached the bug. A task whose failing tests do not all fail again keeps
its report (counted in :attr:`Restated.kept`). Deterministic for a given manifest and pin: the
same command re-run after a merge writes the same reports.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from proofgym.tasks.synth.manifest import TaskRecord, pristine_tree
from proofgym.tasks.synth.patch import apply_patch, patched_paths
from proofgym.tasks.synth.recipe import ProjectPin
from proofgym.tasks.synth.statements import BugEvidence, OfflineWriter, StatementWriter, failures_of

#: variants per sandbox run (one forked process each)
BATCH = 32
SOURCE = "the failing tests run on the buggy source (values, exceptions, the call that reached the bug)"


@dataclass
class Restated:
    records: list[TaskRecord] = field(default_factory=list)
    rewritten: int = 0
    own_words: int = 0  # changelog entries: kept
    kept: list[str] = field(default_factory=list)  # ids whose failures did not reproduce

    def summary(self) -> str:
        return (f"{self.rewritten} reports rewritten, {self.own_words} changelog entries kept, "
                f"{len(self.kept)} kept as they were (their failing tests did not all fail again)")


def _written(record: TaskRecord) -> bool:
    return record.provenance.get("statement", {}).get("writer") != "changelog"


def restate_project(pin: ProjectPin, records: Sequence[TaskRecord], *,
                    writer: StatementWriter | None = None) -> dict[str, TaskRecord]:
    """The records of one project with their reports rewritten (by id; those whose failures did
    not reproduce are left out)."""
    from proofgym.tasks.synth.images import project_image
    from proofgym.tasks.synth.testrun import SuiteRunner

    writer = writer or OfflineWriter()
    top = pristine_tree(pin, quiet=True)
    hidden = {}
    out: dict[str, TaskRecord] = {}
    with SuiteRunner(top, test_roots=pin.tests, python_path=pin.python_path,
                     image=project_image(pin)) as runner:
        for start in range(0, len(records), BATCH):
            batch = records[start:start + BATCH]
            variants = []
            for record in batch:
                files = {p: (top / p).read_bytes() for p in patched_paths(record.patch)}
                variants.append((apply_patch(files, record.patch), list(record.fail_to_pass)))
            watch = [[(str(b["file"]), str(b["function"]), int(b["line"])) for b in r.bugs]
                     for r in batch]
            runs = runner.run_many(variants, timeout_s=60.0, watch=watch)
            for record, run in zip(batch, runs, strict=True):
                if run is None:
                    continue
                failing = {t: run.results.get(t) for t in record.fail_to_pass}
                if any(o is None or o.outcome not in ("failed", "error") for o in failing.values()):
                    continue
                for path in record.hidden_files:
                    if path not in hidden:
                        hidden[path] = (top / path).read_bytes()
                statement = writer.write(BugEvidence(
                    record.project, record.patch, record.bugs, failures_of(failing),
                    len(record.pass_to_pass), [hidden[p] for p in record.hidden_files]))
                made = {**statement.provenance.get("statement", {}), "from": SOURCE}
                out[record.id] = replace(record, title=statement.title, bug_report=statement.report,
                                         provenance={**record.provenance, "statement": made})
    return out


def restate(records: Sequence[TaskRecord], pin_of: Callable[[TaskRecord], ProjectPin], *,
            projects: Sequence[str] | None = None, writer: StatementWriter | None = None,
            quiet: bool = False) -> Restated:
    """``records`` with every written statement re-derived (see the module docstring), in the
    manifest's order; ``projects`` limits the projects restated. ``pin_of`` gives the pin a
    record was made from (:meth:`Recipe.pin_of`: a release-history task of an earlier release is
    run on that release's source)."""
    result = Restated()
    todo: dict[tuple[str, str], list[TaskRecord]] = {}
    for record in records:
        if not _written(record):
            result.own_words += 1
        elif projects is None or record.project in projects:
            todo.setdefault((record.project, record.version), []).append(record)
    new: dict[str, TaskRecord] = {}
    for (name, version), group in todo.items():
        done = restate_project(pin_of(group[0]), group, writer=writer)
        new.update(done)
        if not quiet:
            sys.stderr.write(f"proofgym restate: {name} {version}: {len(done)} of {len(group)} reports "
                             f"(load {os.getloadavg()[0]:.1f})\n")
        result.kept += [r.id for r in group if r.id not in done]
    result.records = [new.get(r.id, r) for r in records]
    result.rewritten = len(new)
    return result


__all__ = ["Restated", "restate", "restate_project"]
