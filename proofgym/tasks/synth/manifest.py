"""The task manifest (one JSON object per line) and the task directories built from it.

A record holds everything needed to rebuild its task from the pinned sdist: the bug's patch, the
operators and sites that made it, the fail-to-pass and pass-to-pass test ids and the bug report.
:func:`materialize` builds the task directory on first use, under the cache:
``repo/`` (the sdist with the bug applied and the failing tests removed: the agent's snapshot, the
only part a sandbox mounts), ``hidden/`` (the original test files, read by the grader on the
host), ``solution/`` (the original source files: the reference) and ``task.json``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from proofgym.core.errors import TaskRecordError
from proofgym.runtimes.private_dirs import write_atomic
from proofgym.tasks.synth.fetch import cache_dir, fetch_sdist, unpack
from proofgym.tasks.synth.hiding import secrets_of, stale_copies, strip_tests
from proofgym.tasks.synth.patch import apply_patch, patched_paths
from proofgym.tasks.synth.recipe import ProjectPin, plain_fields

#: Pytest configuration files a task protects (besides its test paths and every conftest.py).
#: The origin of a bug injected by an operator (every record written before origins existed).
SYNTHETIC = "synthetic operator"

CONFIG_NAMES = ("pytest.ini", "pytest.toml", ".pytest.ini", ".pytest.toml", "setup.cfg", "tox.ini",
                "pyproject.toml")


@dataclass(frozen=True)
class TaskRecord:
    """One synthesised task (a line of the manifest)."""

    id: str
    project: str
    version: str
    tier: int
    bugs: tuple[Mapping[str, Any], ...]  # per injected bug: file, operator, index, function, line
    seed: int
    patch: str
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    title: str
    bug_report: str
    stats: Mapping[str, float] = field(default_factory=dict)
    #: Where parts of the task came from, e.g. ``{"statement": {"writer": "openai", "model": ...,
    #: "prompt": [...]}}`` (see :mod:`proofgym.tasks.synth.statements`).
    provenance: Mapping[str, Any] = field(default_factory=dict)
    #: Where the bug came from: ``"release a->b"`` (a real fix of release ``b`` reverted, see
    #: :mod:`.history`) or ``"synthetic operator"`` (injected by :mod:`.operators`; the default,
    #: so manifests written before the field existed load as what they are).
    origin: str = SYNTHETIC
    #: Fail-to-pass test id -> its checks (by the computed side's source) that the grader leaves
    #: as asserts instead of withholding their literal: those whose value, on the reference
    #: fix, is an object that is no plain data (``withheld.withhold_source``'s ``keep``; found
    #: by ``python -m proofgym.envs.repo_repair.unwithheld``).
    unwithheld: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TaskRecord:
        values = dict(data)
        for key in ("bugs", "fail_to_pass", "pass_to_pass"):
            values[key] = tuple(values[key])
        if "unwithheld" in values:
            values["unwithheld"] = {t: tuple(c) for t, c in values["unwithheld"].items()}
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        out = plain_fields(self)
        if not out["provenance"]:  # records without one stay byte-identical
            del out["provenance"]
        if out["unwithheld"]:
            out["unwithheld"] = {t: list(c) for t, c in sorted(out["unwithheld"].items())}
        else:
            del out["unwithheld"]
        for key in ("bugs", "fail_to_pass", "pass_to_pass"):
            out[key] = list(out[key])
        return out

    @property
    def files(self) -> list[str]:
        return patched_paths(self.patch)

    @property
    def operators(self) -> list[str]:
        return [str(b["operator"]) for b in self.bugs]

    @property
    def hidden_files(self) -> list[str]:
        return sorted({n.split("::", 1)[0] for n in self.fail_to_pass})


#: A record's ``pass_to_pass`` as the manifest file writes it when it is its project's whole
#: stable suite (less its fail-to-pass tests): the suite is listed once, in the manifest's
#: sibling ``<name>.stable.json`` (:func:`suites_path`), not copied into every record.
WHOLE_SUITE = "stable suite"


@dataclass(frozen=True)
class StableSuite:
    """A project's stable tests (those that pass in every run of synthesis' baseline on the
    pristine source) at one version: every task's pass-to-pass is this less its fail-to-pass."""

    version: str
    tests: tuple[str, ...]

    def pass_to_pass(self, fail_to_pass: Sequence[str]) -> tuple[str, ...]:
        failing = set(fail_to_pass)
        return tuple(t for t in self.tests if t not in failing)


def suites_path(manifest: str | Path) -> Path:
    """Where the stable suites of ``manifest``'s projects are listed (``tasks.jsonl``:
    ``tasks.stable.json``)."""
    return Path(manifest).with_suffix(".stable.json")


def read_suites(manifest: str | Path) -> dict[str, StableSuite]:
    """The stable suite of each project of ``manifest`` (none without the file)."""
    path = suites_path(manifest)
    if not path.is_file():
        return {}
    data = orjson.loads(path.read_bytes())
    return {name: StableSuite(str(entry["version"]), tuple(entry["tests"]))
            for name, entry in data["projects"].items()}


def write_suites(manifest: str | Path, suites: Mapping[str, StableSuite]) -> None:
    data = {"projects": {name: {"version": s.version, "tests": list(s.tests)}
                         for name, s in sorted(suites.items())}}
    write_atomic(suites_path(manifest), orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n")


def task_id(project: str, patch: str) -> str:
    return f"{project}-{hashlib.sha256(patch.encode()).hexdigest()[:10]}"


def read_manifest(path: str | Path) -> list[TaskRecord]:
    """The records of ``path``; a record whose ``pass_to_pass`` is :data:`WHOLE_SUITE` gets
    its project's stable suite (:func:`read_suites`) less its fail-to-pass tests."""
    path = Path(path)
    records = []
    suites: dict[str, StableSuite] | None = None
    with open(path, "rb") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                data = orjson.loads(line)
                if data.get("pass_to_pass") == WHOLE_SUITE:
                    suites = read_suites(path) if suites is None else suites
                    suite = suites.get(data["project"])
                    if suite is None or suite.version != data["version"]:
                        raise TaskRecordError(f"{suites_path(path).name} lists no stable suite of "
                                         f"{data['project']} {data['version']}")
                    data["pass_to_pass"] = suite.pass_to_pass(data["fail_to_pass"])
                records.append(TaskRecord.from_dict(data))
            except (orjson.JSONDecodeError, TypeError, KeyError) as exc:
                raise TaskRecordError(f"{path}:{number}: not a task record ({exc})") from exc
            except ValueError as exc:
                raise TaskRecordError(f"{path}:{number}: {exc}") from exc
    return records


def write_manifest(path: str | Path, records: Iterable[TaskRecord]) -> None:
    """Write ``records`` to ``path``; a record whose pass-to-pass is its project's whole stable
    suite (as listed beside ``path``, :func:`read_suites`) says so (:data:`WHOLE_SUITE`)
    instead of repeating it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    suites = read_suites(path)
    lines = []
    for record in records:
        data = record.to_dict()
        suite = suites.get(record.project)
        if suite is not None and suite.version == record.version and \
                record.pass_to_pass == suite.pass_to_pass(record.fail_to_pass):
            data["pass_to_pass"] = WHOLE_SUITE
        lines.append(orjson.dumps(data, option=orjson.OPT_SORT_KEYS) + b"\n")
    write_atomic(path, b"".join(lines))


def pristine_tree(pin: ProjectPin, *, quiet: bool = False) -> Path:
    """The unpacked sdist of ``pin`` (fetched and verified on first use)."""
    sdist = fetch_sdist(pin.name, pin.version, pin.sha256, pin.url, quiet=quiet)
    return unpack(sdist, cache_dir() / "src" / f"{pin.key}-{pin.sha256[:12]}")


def protected_paths(pin: ProjectPin) -> tuple[str, ...]:
    return (*pin.tests, "conftest.py", *CONFIG_NAMES)


def task_meta(record: TaskRecord, pin: ProjectPin) -> dict[str, Any]:
    """The ``task.json`` of a materialized task (the CodeRepair task format)."""
    roots = " ".join(pin.tests)
    return {"id": record.id, "title": record.title, "issue": record.bug_report,
            "test_command": f"python -m pytest -q {roots}",
            "fail_to_pass": list(record.fail_to_pass), "pass_to_pass": list(record.pass_to_pass),
            "protected": list(protected_paths(pin)), "project": record.project,
            "requirements": list(pin.requirements), "python_path": list(pin.python_path)}


def pytest_ini(pin: ProjectPin) -> bytes:
    """The task's own ``pytest.ini``: found first by pytest and by the grader, so the project's
    options (``addopts`` naming plugins the image lacks, warnings as errors) do not apply, in the
    agent's runs and in grading alike, as in synthesis."""
    lines = ["[pytest]", "# written by proofgym: the options this task's tests run with"]
    if pin.python_path:
        lines.append("pythonpath = " + " ".join(pin.python_path))
    return ("\n".join(lines) + "\n").encode()


#: What :func:`build_task_dir` writes, by version: a task built by an older one is built again
#: (2: without the sdist's stale copies of hidden tests and original code).
BUILD_LAYOUT = b"layout 2"


def materialize(record: TaskRecord, pin: ProjectPin, *, root: Path | None = None,
                quiet: bool = True) -> Path:
    """The task directory of ``record`` (built once; rebuilt if its record or
    :data:`BUILD_LAYOUT` changed)."""
    stamp = hashlib.sha256(orjson.dumps(record.to_dict(), option=orjson.OPT_SORT_KEYS)
                           + BUILD_LAYOUT).hexdigest()
    target = (root or cache_dir() / "tasks") / pin.key / record.id
    done = target / ".built"
    if done.is_file() and done.read_text() == stamp:
        return target
    top = pristine_tree(pin, quiet=quiet)
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{record.id}-"))
    try:
        build_task_dir(work, top, record, pin)
        (work / ".built").write_text(stamp)
        if target.exists():
            shutil.rmtree(target)
        os.replace(work, target)
    finally:
        if work.exists():
            shutil.rmtree(work)
    return target


def build_task_dir(into: Path, top: Path, record: TaskRecord, pin: ProjectPin) -> None:
    """Write ``repo/``, ``hidden/``, ``solution/`` and ``task.json`` of ``record`` into ``into``."""
    repo = into / "repo"
    shutil.copytree(top, repo, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".unpacked"))
    originals = {p: (top / p).read_bytes() for p in record.files}
    for path, content in apply_patch(originals, record.patch).items():
        (repo / path).write_bytes(content)
        _write(into / "solution" / path, originals[path])
    by_file: dict[str, list[str]] = {}
    for node in record.fail_to_pass:
        by_file.setdefault(node.split("::", 1)[0], []).append(node)
    hidden = {}
    for path, nodes in by_file.items():
        hidden[path] = original = (top / path).read_bytes()
        _write(into / "hidden" / path, original)
        (repo / path).write_bytes(strip_tests(original, nodes))
    # an sdist's leftovers (funcy 2.0's tests/test_decorators.py.orig holds two hidden tests
    # of its release task): not in the workspace (tests/security/test_attack_stale_copies.py)
    for stale in stale_copies(repo, secrets_of(hidden, record.fail_to_pass, record.patch)):
        stale.unlink()
    (repo / "pytest.ini").write_bytes(pytest_ini(pin))
    (into / "task.json").write_bytes(orjson.dumps(task_meta(record, pin), option=orjson.OPT_INDENT_2))


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def by_project(records: Sequence[TaskRecord]) -> Mapping[str, list[TaskRecord]]:
    out: dict[str, list[TaskRecord]] = {}
    for record in records:
        out.setdefault(record.project, []).append(record)
    return out
