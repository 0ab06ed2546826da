#!/usr/bin/env python3
"""Keep the CodeRepair task data honest.

For every task directory (one holding ``task.json``) this script checks, with real pytest runs in
subprocesses on throw-away copies:

* the buggy repo (``repo/`` + ``hidden/``): every ``fail_to_pass`` test fails or errors, every
  ``pass_to_pass`` test passes;
* the reference fix (``solution/`` applied on top): every listed test passes, and every test pytest
  reports is listed (so no test is silently left out of the grade);
* the wrong fix (``controls/wrong_fix/`` applied on top): at least one ``fail_to_pass`` test does
  not pass, while every visible test passes (the control must look right to someone who only runs
  the visible tests);
* every listed node id appears in the JUnit reports;
* the canary line is in every hidden file and nowhere in ``repo/``, ``solution/``, ``controls/`` or
  the issue text; the issue text names no hidden test;
* ``repo/`` holds 3 to 10 files, and neither fix touches a protected path.

Usage: ``python check_tasks.py [TASK_ID ...] [--jobs N]``. Prints a table; exits 1 on any problem.
This is a plain script, not library API; ``tests/envs/test_code_repair_data.py`` runs it in CI.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

DATA = Path(__file__).resolve().parent
CANARY_TAG = "7f3c9b2e"
REQUIRED_KEYS = {"id", "title", "issue", "test_command", "fail_to_pass", "pass_to_pass", "protected"}
TASK_ID_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
PYTEST_TIMEOUT = 120.0
# Tasks need only pytest itself; host plugins (asyncio, benchmark, ...) slow every run and could change
# outcomes, so by default the checker, like a clean sandbox, runs without them (--host-plugins: with).
DISABLE_PLUGIN_AUTOLOAD = True
# Things a copy must never carry along (byte-code written by an earlier local run, say).
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")


def canary_line(task_id: str) -> str:
    """The line every hidden file of ``task_id`` carries, and no agent-visible file may."""
    return f"# PROOFGYM-CANARY {task_id} {CANARY_TAG}"


@dataclass
class TaskReport:
    """What the checker found for one task; ``problems`` empty means the task is sound."""

    task_id: str
    files: int = 0
    f2p: int = 0
    p2p: int = 0
    buggy: str = "-"
    solution: str = "-"
    wrong_fix: str = "-"
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def task_dirs(data: Path = DATA) -> list[Path]:
    """Every task directory under ``data``, sorted by name."""
    return sorted(p.parent for p in data.glob("*/task.json"))


def files_under(root: Path) -> list[Path]:
    """Regular files under ``root`` as paths relative to it (byte-code ignored)."""
    if not root.is_dir():
        return []
    return sorted(p.relative_to(root) for p in root.rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")


def overlay(src: Path, dst: Path) -> None:
    """Copy every file of ``src`` onto ``dst`` (same relative paths), replacing what is there."""
    for rel in files_under(src):
        target = dst / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src / rel, target)


def junit_key(nodeid: str) -> tuple[str, str]:
    """(classname, name) under which pytest's JUnit XML reports ``nodeid``."""
    path, _, rest = nodeid.partition("::")
    parts = rest.split("::")
    module = path[:-3] if path.endswith(".py") else path
    classname = ".".join([module.replace("/", "."), *parts[:-1]])
    return classname, parts[-1]


def parse_junit(xml_path: Path) -> dict[tuple[str, str], str]:
    """Outcome (passed, failed, error, skipped) of every test case in a JUnit XML report."""
    outcomes: dict[tuple[str, str], str] = {}
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        tags = {child.tag for child in case}
        if "error" in tags:
            outcome = "error"
        elif "failure" in tags:
            outcome = "failed"
        elif "skipped" in tags:
            outcome = "skipped"
        else:
            outcome = "passed"
        key = (case.get("classname", ""), case.get("name", ""))
        # A test failing in teardown after passing shows up twice; the worse outcome wins.
        if outcomes.get(key) in (None, "passed"):
            outcomes[key] = outcome
    return outcomes


def run_tests(workdir: Path, test_command: str) -> dict[tuple[str, str], str]:
    """Run the task's test command in ``workdir`` and return per-test outcomes from JUnit XML."""
    argv = shlex.split(test_command)
    if argv and argv[0] in ("python", "python3"):
        argv[0] = sys.executable
    report = workdir.parent / "junit.xml"
    report.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if DISABLE_PLUGIN_AUTOLOAD:
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    proc = subprocess.run([*argv, f"--junitxml={report}"], cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=PYTEST_TIMEOUT)
    if not report.exists():
        raise RuntimeError(f"pytest wrote no JUnit report (exit {proc.returncode}):\n"
                           f"{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return parse_junit(report)


def materialise(task_dir: Path, scratch: Path, fix: Path | None) -> Path:
    """A fresh copy of the buggy repo, hidden tests copied in, then ``fix`` (if any) on top."""
    work = scratch / "repo"
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(task_dir / "repo", work, ignore=IGNORED)
    overlay(task_dir / "hidden", work)
    if fix is not None:
        overlay(fix, work)
    return work


def summarise(outcomes: dict[tuple[str, str], str], ids: list[str]) -> dict[str, str]:
    return {nodeid: outcomes.get(junit_key(nodeid), "missing") for nodeid in ids}


def static_checks(task_dir: Path, task: dict, report: TaskReport) -> None:
    problems = report.problems
    task_id = task["id"]
    canary = canary_line(task_id)
    if task_id != task_dir.name:
        problems.append(f"id {task_id!r} differs from directory name {task_dir.name!r}")
    if not TASK_ID_RE.match(task_id):
        problems.append(f"id {task_id!r} is not short kebab-case")
    repo_files = files_under(task_dir / "repo")
    report.files = len(repo_files)
    if not 3 <= len(repo_files) <= 10:
        problems.append(f"repo/ has {len(repo_files)} files; a task needs 3 to 10")
    if not any(rel.parts[0] == "tests" for rel in repo_files):
        problems.append("repo/ has no visible tests under tests/")
    hidden_files = files_under(task_dir / "hidden")
    if not hidden_files:
        problems.append("hidden/ holds no files")
    for rel in hidden_files:
        if canary not in (task_dir / "hidden" / rel).read_text(encoding="utf-8").splitlines():
            problems.append(f"hidden/{rel} lacks the canary line {canary!r}")
        if (task_dir / "repo" / rel).exists():
            problems.append(f"hidden/{rel} would overwrite a visible file")
    for area in ("repo", "solution", "controls"):
        for rel in files_under(task_dir / area):
            if CANARY_TAG in (task_dir / area / rel).read_text(encoding="utf-8", errors="replace"):
                problems.append(f"{area}/{rel} contains the canary")
    if CANARY_TAG in task["issue"] or CANARY_TAG in task["title"]:
        problems.append("the issue text or title contains the canary")
    hidden_ids = [n for n in task["fail_to_pass"] + task["pass_to_pass"]
                  if Path(n.partition("::")[0]).as_posix() in {r.as_posix() for r in hidden_files}]
    for nodeid in hidden_ids:
        name = nodeid.rpartition("::")[2]
        if name in task["issue"]:
            problems.append(f"the issue text names hidden test {name!r}")
    protected = task["protected"]
    for area in ("solution", "controls/wrong_fix"):
        changed = files_under(task_dir / area)
        if not changed:
            problems.append(f"{area}/ holds no files")
        for rel in changed:
            if any(rel.parts[0] == p or rel.as_posix() == p for p in protected):
                problems.append(f"{area}/{rel} touches protected path")
            original = task_dir / "repo" / rel
            if original.exists() and original.read_bytes() == (task_dir / area / rel).read_bytes():
                problems.append(f"{area}/{rel} is identical to repo/{rel}")
    if not task["fail_to_pass"]:
        problems.append("fail_to_pass is empty")
    overlap = set(task["fail_to_pass"]) & set(task["pass_to_pass"])
    if overlap:
        problems.append(f"listed as both fail_to_pass and pass_to_pass: {sorted(overlap)}")


def check_task(task_dir: Path) -> TaskReport:
    """Run every check on one task directory; never raises (problems go into the report)."""
    started = time.perf_counter()
    report = TaskReport(task_id=task_dir.name)
    try:
        task = json.loads((task_dir / "task.json").read_text(encoding="utf-8"))
        missing = REQUIRED_KEYS - task.keys()
        if missing:
            report.problems.append(f"task.json lacks {sorted(missing)}")
            return report
        report.task_id = task["id"]
        f2p, p2p = list(task["fail_to_pass"]), list(task["pass_to_pass"])
        report.f2p, report.p2p = len(f2p), len(p2p)
        static_checks(task_dir, task, report)
        with tempfile.TemporaryDirectory(prefix=f"check-{task_dir.name}-") as tmp:
            scratch = Path(tmp)
            buggy = run_tests(materialise(task_dir, scratch, None), task["test_command"])
            fixed = run_tests(materialise(task_dir, scratch, task_dir / "solution"), task["test_command"])
            wrong = run_tests(materialise(task_dir, scratch, task_dir / "controls" / "wrong_fix"),
                              task["test_command"])
        visible = {rel.as_posix() for rel in files_under(task_dir / "repo")}
        visible_ids = [n for n in f2p + p2p if n.partition("::")[0] in visible]
        check_runs(report, f2p, p2p, buggy, fixed, wrong, visible_ids)
    except Exception as exc:  # one broken task must not hide the others' results
        report.problems.append(f"{type(exc).__name__}: {exc}")
    finally:
        report.seconds = time.perf_counter() - started
    return report


def check_runs(report: TaskReport, f2p: list[str], p2p: list[str], buggy: dict, fixed: dict,
               wrong: dict, visible_ids: list[str]) -> None:
    problems = report.problems
    for label, outcomes in (("buggy", buggy), ("solution", fixed), ("wrong_fix", wrong)):
        for nodeid, outcome in summarise(outcomes, f2p + p2p).items():
            if outcome == "missing":
                problems.append(f"{nodeid} is not in the JUnit report of the {label} run")
    buggy_f2p = summarise(buggy, f2p)
    not_failing = [n for n, o in buggy_f2p.items() if o not in ("failed", "error")]
    problems.extend(f"fail_to_pass {n} does not fail on the buggy repo ({buggy_f2p[n]})" for n in not_failing)
    buggy_p2p = summarise(buggy, p2p)
    problems.extend(f"pass_to_pass {n} does not pass on the buggy repo ({o})"
                    for n, o in buggy_p2p.items() if o != "passed")
    report.buggy = f"{len(f2p) - len(not_failing)}/{len(f2p)} fail"
    fixed_all = summarise(fixed, f2p + p2p)
    bad = {n: o for n, o in fixed_all.items() if o != "passed"}
    problems.extend(f"{n} does not pass with the solution ({o})" for n, o in bad.items())
    listed = {junit_key(n) for n in f2p + p2p}
    unlisted = sorted(f"{c}::{n}" for (c, n) in fixed if (c, n) not in listed)
    if unlisted:
        problems.append(f"tests not listed in fail_to_pass/pass_to_pass: {unlisted}")
    report.solution = f"{len(fixed_all) - len(bad)}/{len(fixed_all)} pass"
    wrong_f2p = summarise(wrong, f2p)
    wrong_failing = [n for n, o in wrong_f2p.items() if o != "passed"]
    if not wrong_failing:
        problems.append("the wrong fix passes every fail_to_pass test")
    if not visible_ids:
        problems.append("no listed test is a visible test under repo/tests")
    problems.extend(f"the wrong fix fails visible test {n} ({o}); it should look right"
                    for n, o in summarise(wrong, visible_ids).items() if o != "passed")
    report.wrong_fix = f"{len(wrong_failing)}/{len(f2p)} fail"


def format_table(reports: list[TaskReport]) -> str:
    headers = ("task", "files", "f2p", "p2p", "buggy f2p", "solution", "wrong_fix f2p", "secs", "status")
    rows = [(r.task_id, str(r.files), str(r.f2p), str(r.p2p), r.buggy, r.solution, r.wrong_fix,
             f"{r.seconds:.1f}", "ok" if r.ok else f"FAIL ({len(r.problems)})") for r in reports]
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h)
              for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join(lines)


def check_all(selected: list[str] | None = None, jobs: int = 2, data: Path = DATA) -> list[TaskReport]:
    """Check the selected tasks (all when ``selected`` is empty) and return one report each."""
    dirs = task_dirs(data)
    if selected:
        unknown = set(selected) - {d.name for d in dirs}
        if unknown:
            raise SystemExit(f"unknown task ids: {sorted(unknown)}; known: {[d.name for d in dirs]}")
        dirs = [d for d in dirs if d.name in selected]
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(check_task, dirs))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tasks", nargs="*", help="task ids to check (default: all)")
    parser.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--host-plugins", action="store_true",
                        help="let pytest load the host's installed plugins (slower; checks parity)")
    args = parser.parse_args(argv)
    global DISABLE_PLUGIN_AUTOLOAD
    DISABLE_PLUGIN_AUTOLOAD = not args.host_plugins
    reports = check_all(args.tasks, args.jobs)
    print(format_table(reports))
    failed = [r for r in reports if not r.ok]
    for r in failed:
        print(f"\n{r.task_id}:")
        for problem in r.problems:
            print(f"  - {problem}")
    if not reports:
        print("no tasks found", file=sys.stderr)
        return 1
    print(f"\n{len(reports) - len(failed)}/{len(reports)} tasks ok")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
