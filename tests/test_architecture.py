"""The import graph: layers point downward, the sandbox has one face, no module-level circles.

Read from the source (``ast``), never by importing: what a module imports at module level (not
under ``if TYPE_CHECKING:``, not inside functions) is what runs when it is imported.
"""

from __future__ import annotations

import ast
import functools
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "proofgym"


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


MODULES = _modules()


@functools.cache
def _parse(source: str) -> ast.Module:
    """A source's tree, parsed once per process (a dozen tests read every library module; none
    changes a tree)."""
    return ast.parse(source)


@functools.cache
def _walk(source: str) -> tuple[ast.AST, ...]:
    """Every node of a source's tree, in ``ast.walk``'s order, listed once per process."""
    return tuple(ast.walk(_parse(source)))


def _resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _top_imports(module: str) -> list[ast.Import | ast.ImportFrom]:
    tree = _parse(MODULES[module].read_text())
    out: list[ast.Import | ast.ImportFrom] = []
    todo = list(tree.body)
    while todo:
        node = todo.pop(0)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.append(node)
        elif isinstance(node, ast.If) and not _is_type_checking(node):
            todo[:0] = [*node.body, *node.orelse]
        elif isinstance(node, ast.Try):
            todo[:0] = [*node.body, *node.orelse, *node.finalbody,
                        *(s for h in node.handlers for s in h.body)]
    return out


def _absolute(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
    return f"{base}.{node.module}" if node.module else base


def _edges(module: str) -> set[str]:
    targets = set()
    for node in _top_imports(module):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            base = _absolute(module, node)
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base
                     for a in node.names]
        for name in names:
            target = _resolve(name)
            if target and target != module and target.startswith("proofgym"):
                targets.add(target)
    return targets


def test_no_module_level_import_circles():
    graph = {m: _edges(m) for m in MODULES}
    # the reader sees imports (a graph with no edges would pass anything)
    assert "proofgym.verify.sandboxed.mutants" in graph["proofgym.verify.sandboxed.isolated"]
    assert "proofgym.runtimes.sandbox.bwrap" in graph["proofgym.runtimes.sandbox.box"]
    # a package's __init__ re-exports its submodules; a submodule importing a sibling through
    # the package's face is not a circle of files
    for m in graph:
        graph[m] = {t for t in graph[m] if not (MODULES[t].name == "__init__.py" and m.startswith(t + "."))}
    circles, state = [], {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                circles.append([*stack[stack.index(nxt):], nxt])
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [])
    assert not circles, f"module-level import circles: {circles}"


#: DESIGN.md's layers, bottom first; a module imports (at module level) only from its own layer or
#: one below. The top row sits on the library and may import any of it.
LAYERS = [
    ("core", "version", "errors"), ("daemon", "chat_client"), ("tools",), ("programs",), ("runtimes",),
    ("spaces",), ("tasks",), ("env",), ("make",), ("record",), ("verify",), ("rollout",), ("eval",),
    ("wire",),
    ("cli", "serve", "remote", "envs", "integrations", "testing", "__init__", "__main__"),
]
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_imports_point_downward_only():
    unplaced = sorted({_layer(m) for m in MODULES} - set(RANK))
    assert not unplaced, f"place these in LAYERS (DESIGN.md's layer list): {unplaced}"
    upward = [f"{m} -> {t}" for m in MODULES for t in _edges(m)
              if RANK[_layer(t)] > RANK[_layer(m)] and RANK[_layer(m)] < len(LAYERS) - 1]
    assert not upward, f"imports that point upward: {upward}"
    # the check sees edges: verify imports record, eval imports rollout
    assert any(_layer(t) == "record" for t in _edges("proofgym.verify.regrade"))


def _all_imports(module: str) -> set[str]:
    """Every ``proofgym`` module ``module`` imports, at any depth of its code (functions too)."""
    found = set()
    for node in _walk(MODULES[module].read_text()):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(module, node)
            found |= {f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names}
    return {t for t in map(_resolve, found) if t and t.startswith("proofgym")}


def test_the_remote_road_is_straight():
    """The client (``remote/``) imports nothing of the server (``serve/``), anywhere in its code;
    both speak the one wire module, which imports neither; ``RemoteEnv`` is a peer of the local env
    under the env protocol, not a subclass replacing its state machine."""
    from proofgym.env import UniversalVerifiableEnv, VerifiableEnv
    from proofgym.remote import RemoteEnv

    remote = [m for m in MODULES if m.startswith("proofgym.remote")]
    serve = [m for m in MODULES if m.startswith("proofgym.serve")]
    assert remote and serve
    reaching = sorted(f"{m} -> {t}" for m in remote for t in _all_imports(m)
                      if t.startswith("proofgym.serve"))
    assert reaching == []
    assert any("proofgym.wire" in _all_imports(m) for m in remote)
    assert any("proofgym.wire" in _all_imports(m) for m in serve)
    wire = _all_imports("proofgym.wire")
    assert "proofgym.core" in wire
    assert not {t for t in wire if t.startswith(("proofgym.serve", "proofgym.remote"))}
    assert not issubclass(RemoteEnv, UniversalVerifiableEnv)
    assert {"reset", "step", "verification_job", "charge", "close", "grades_itself"} <= \
        set(dir(VerifiableEnv)) | set(VerifiableEnv.__annotations__)


#: The HTTP stacks of the library: httpx (and the openai SDK, over httpx) for clients,
#: Starlette on uvicorn for servers. Nothing of ours speaks HTTP through another.
_OTHER_HTTP = ("aiohttp", "websockets", "urllib.request", "requests", "urllib3", "http.client",
               "http.server", "tornado", "flask", "fastapi")


def test_two_http_stacks_only():
    offenders = []
    for module, path in MODULES.items():
        for node in _walk(path.read_text()):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            offenders += [f"{module}: {n}" for n in names if n.startswith(_OTHER_HTTP)]
    assert offenders == []


#: packages with a face: code outside one imports only the names in its ``__all__``
FACED = ("proofgym.runtimes.sandbox", "proofgym.verify.pool", "proofgym.verify.sandboxed",
         "proofgym.verify.graders")


@pytest.mark.parametrize("package", FACED)
def test_nothing_outside_a_package_reaches_past_its_face(package):
    """Only the package itself, and only the names in its ``__all__``: the sandbox is assembled in
    one place (``box.py``), grading goes through one pool, and a hardening there holds everywhere.
    (A face's submodules may be imported as modules, e.g. ``from proofgym.verify.graders import
    answers``, only by tests, never by the library.)"""
    exported = set(importlib.import_module(package).__all__)
    offenders = []
    for module, path in MODULES.items():
        if module == package or module.startswith(package + "."):
            continue
        for node in _walk(path.read_text()):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                if node.module.startswith(package + "."):
                    offenders.append(f"{module}: from {node.module} import ...")
                elif node.module == package:
                    offenders += [f"{module}: {a.name}" for a in node.names if a.name not in exported]
            elif isinstance(node, ast.Import):
                offenders += [f"{module}: import {a.name}" for a in node.names
                              if a.name.startswith(package + ".")]
    assert not offenders, offenders


# ------------------------------------------------------------ programs apart
#: ``proofgym/programs/``: the programs that run inside sandboxes (or as a process of their own),
#: read as files by the host side (``proofgym.runtimes.program_files``), never imported.
PROGRAMS = "proofgym.programs"
#: What a library file may hold at most (the programs and the bundled tasks' data are not library).
MAX_LINES = 600


def program_imports(sources: dict[str, str]) -> list[str]:
    """Every import of a program in ``sources`` (module name -> text): an ``import``/``from``
    statement anywhere (functions and ``TYPE_CHECKING`` blocks included) naming a module under
    :data:`PROGRAMS`, or ``importlib.import_module``/``__import__`` of one; and, in a program,
    any import of proofgym at all (it runs on the standard library alone)."""
    found = []
    for module, text in sources.items():
        program = module.startswith(PROGRAMS + ".")
        banned = "proofgym" if program else PROGRAMS
        for node in _walk(text):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(module, node) if node.level else node.module or ""
                names = [base, *(f"{base}.{a.name}" for a in node.names)]
            elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
                  and ast.unparse(node.func) in ("importlib.import_module", "import_module", "__import__")):
                names = [str(node.args[0].value)]
            else:
                continue
            if any(n == banned or n.startswith(banned + ".") for n in names):
                found.append(f"{module}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_module_imports_a_program():
    """The in-sandbox programs are files the host reads; no module of the library imports one
    (sharing a constant goes through ``program_files.constant``), and no program imports proofgym."""
    assert not (PACKAGE / "programs" / "__init__.py").exists()
    programs = {m for m in MODULES if m.startswith(PROGRAMS + ".")}
    names = ("supervisor", "spawner", "pytest_runner", "suite_runner", "epilogue")
    assert {f"{PROGRAMS}.{name}" for name in names} <= programs
    assert program_imports({m: p.read_text() for m, p in MODULES.items()}) == []


@pytest.mark.parametrize("second_road", [
    "from proofgym.programs.supervisor import MAGIC\n",
    "from proofgym.programs import spawner\n",
    "def f():\n    import proofgym.programs.spawner\n",
    "import importlib\nspawner = importlib.import_module('proofgym.programs.spawner')\n",
    "from ...programs import supervisor\n",
])
def test_an_import_of_a_program_is_caught(second_road: str):
    module = "proofgym.runtimes.sandbox.shell"
    original = MODULES[module].read_text()
    assert program_imports({module: original}) == []
    (found,) = program_imports({module: original + "\n\n" + second_road})
    assert found.startswith(f"{module}:")


def test_a_program_importing_proofgym_is_caught():
    module = f"{PROGRAMS}.spawner"
    original = MODULES[module].read_text()
    assert program_imports({module: original}) == []
    (found,) = program_imports({module: original + "\nfrom proofgym.core import errors\n"})
    assert found.startswith(f"{module}:")


def test_the_largest_library_file_is_under_the_limit():
    """Files over a few hundred lines are usually two concepts; none of the library's is over
    :data:`MAX_LINES`."""
    sizes = {m: len(p.read_text().splitlines()) for m, p in MODULES.items()
             if not m.startswith(PROGRAMS + ".") and ".data." not in m}
    assert len(sizes) > 150 and max(sizes.values()) > 300  # the scan sees the library
    assert {m: n for m, n in sizes.items() if n >= MAX_LINES} == {}


# ------------------------------------------------------------ records: one road
#: The one module that derives a trajectory id and stamps provenance onto a record.
ID_MODULE = "proofgym.record.ids"
#: Trajectory ids look like ``CONTRACT/TASK#ATTEMPT``: an id is being built when text is
#: formatted around a ``#`` (an f-string, ``str.format``, ``%`` or ``+``).
_ID_TEMPLATE = re.compile(r"\}#\{|%[a-z]#%|\}#%|%[a-z]#\{")


def _template(node: ast.JoinedStr) -> str:
    return "".join(v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else "{}"
                   for v in node.values)


def _derived(node: ast.expr | None) -> bool:
    """Whether an expression given as a trajectory id takes it from the one derivation: a call of
    ``trajectory_id_for``, a plan's ``.key`` (itself derived) or an id carried over unchanged."""
    if isinstance(node, ast.BoolOp):
        return all(_derived(v) for v in node.values)
    if isinstance(node, ast.Call):
        func = node.func
        return (func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")) == "trajectory_id_for"
    if isinstance(node, ast.Attribute):
        return node.attr in ("key", "trajectory_id")
    return isinstance(node, ast.Constant) and node.value == ""  # no id yet: the env picks the task


def _id_text(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and bool(
        _ID_TEMPLATE.search(node.value) or node.value.startswith("#") or node.value.endswith("#"))


def _builds_id(node: ast.AST) -> bool:
    """Text formatted around a ``#``: an f-string, ``"...".format``, ``%`` or ``+``."""
    if isinstance(node, ast.JoinedStr):
        return bool(_ID_TEMPLATE.search(_template(node)))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        return isinstance(node.func.value, ast.Constant) and bool(
            _ID_TEMPLATE.search(str(node.func.value.value)))
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mod, ast.Add)):
        return _id_text(node.left) or _id_text(node.right)
    return False


def id_derivations(sources: dict[str, str]) -> list[str]:
    """Every place in ``sources`` (module name -> text) outside :data:`ID_MODULE` that builds a
    trajectory id itself or writes one onto a record."""
    found = []
    for module, text in sources.items():
        if module == ID_MODULE:
            continue
        for node in _walk(text):
            where = f"{module}:{getattr(node, 'lineno', '?')}"
            if _builds_id(node):
                found.append(f"{where}: builds an id ({ast.unparse(node)})")
            elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Attribute) and target.attr in ("trajectory_id", "contract_id") \
                            and not (isinstance(target.value, ast.Name) and target.value.id == "self"):
                        found.append(f"{where}: stamps .{target.attr} (use record.ids.stamp)")
                    elif (isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant)
                          and target.slice.value == "trajectory_id" and not _derived(node.value)):
                        found.append(f"{where}: writes a record's trajectory_id not derived by "
                                      "trajectory_id_for")
            elif isinstance(node, ast.Call):
                func = node.func
                name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
                given = [k.value for k in node.keywords if k.arg == "trajectory_id"]
                if name == "Trajectory" and node.args:
                    given.append(node.args[0])
                if name in ("Trajectory", "replace") and any(not _derived(v) for v in given):
                    found.append(f"{where}: {name}(trajectory_id=...) not derived by trajectory_id_for")
                if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
                        and func.value.id == "hashlib" and re.search(
                            r"contract|attempt|trajectory", ast.unparse(node)):
                    found.append(f"{where}: hashes record ids ({ast.unparse(node)})")
    return found


def _library_and_bench_sources() -> dict[str, str]:
    sources = {m: p.read_text() for m, p in MODULES.items()}
    sources.update({f"bench.{p.stem}": p.read_text() for p in (ROOT / "bench").rglob("*.py")})
    return sources


def test_one_place_derives_trajectory_ids():
    """``proofgym.record.ids`` derives every trajectory id and stamps every record's provenance;
    the library and the benches call it (tests may write any id they like)."""
    sources = _library_and_bench_sources()
    ids = sources[ID_MODULE]
    assert "def trajectory_id_for(" in ids and "def stamp(" in ids
    assert id_derivations(sources) == []
    # the scan sees the real callers (a scan that saw nothing would pass anything)
    callers = [m for m, text in sources.items() if "trajectory_id_for(" in text and m != ID_MODULE]
    assert {"proofgym.rollout.recorder", "proofgym.eval.runs", "proofgym.eval.validate"} <= set(callers)
    assert all("stamp(" in sources[m] for m in ("proofgym.record.store", "proofgym.eval.runs",
                                                "proofgym.rollout.recorder"))


@pytest.mark.parametrize("second_road", [
    'def tid(c, t, a):\n    return f"{c}/{t}#{a}"\n',
    'def tid(t, a):\n    return "{}#{}".format(t, a)\n',
    'def tid(t, a):\n    return "%s#%d" % (t, a)\n',
    'def tid(t, a):\n    return t + "#" + str(a)\n',
    'def fix(traj, c):\n    traj.trajectory_id = c + traj.task_id\n',
    'def fix(traj, c):\n    traj.contract_id = c\n',
    'def fix(record, t):\n    record["trajectory_id"] = t.upper()\n',
    'def new(t):\n    return Trajectory(trajectory_id="placeholder", env_id="", task_id=t)\n',
    'def new(t, a):\n    return Trajectory(trajectory_id=make_id(t, a), env_id="", task_id=t)\n',
    'def new(t):\n    return dataclasses.replace(t, trajectory_id=t.task_id)\n',
    'import hashlib\ndef tid(contract_id, t):\n    return hashlib.sha1(contract_id.encode() + t).digest()\n',
])
def test_a_second_id_derivation_is_caught(second_road: str):
    """Each way of building or writing an id outside ``record.ids`` fails the check above (the
    check looks at each module on its own, so the one module changed is the one scanned here;
    the whole tree is scanned clean by the test above)."""
    module = "proofgym.eval.report"
    original = MODULES[module].read_text()
    assert id_derivations({module: original}) == []
    (found,) = id_derivations({module: original + "\n\n" + second_road})
    assert found.startswith(f"{module}:")


def test_the_record_shims_are_gone():
    """One reader of a run directory (``proofgym.record.rundir``) and one summary function
    (``proofgym.eval.metrics.summarize``): the re-exporting shims left behind are removed and
    nothing imports them (library, tests, benches, docs)."""
    assert not (PACKAGE / "eval" / "rundir.py").exists()
    assert not (PACKAGE / "eval" / "summary.py").exists()
    shim = re.compile(r"proofgym[./]eval[./](rundir|summary)\b|RunDirError")
    texts = [*PACKAGE.rglob("*.py"), *(ROOT / "tests").rglob("*.py"), *(ROOT / "bench").rglob("*.py"),
             *(ROOT / "docs").rglob("*.md")]
    me = Path(__file__).resolve()
    users = [str(p.relative_to(ROOT)) for p in texts if p.resolve() != me and shim.search(p.read_text())]
    assert len(texts) > 50 and users == []


def test_run_records_are_read_in_one_place():
    """Only ``proofgym.record`` turns JSONL lines into trajectories: every reader (store, resume,
    report, compare, export, verify) goes through ``record.rundir.read_records``."""
    offenders = []
    for module, text in _library_and_bench_sources().items():
        if module.startswith("proofgym.record"):
            continue
        for name in ("scan_jsonl", "latest_records", "trajectory_from_record", "read_records",
                     "Trajectory.from_dict"):
            if re.search(rf"\b{re.escape(name)}\b", text):
                offenders.append(f"{module}: {name}")
    assert offenders == []
    rundir = MODULES["proofgym.record.rundir"].read_text()
    store = MODULES["proofgym.record.store"].read_text()
    assert "def read_records(" in rundir and store.count("read_records(") >= 3


# ------------------------------------------------------------ the Task contract: hooks declared
HOOKS = {"verifier_version": "1", "hidden_key": None, "split": None, "stratum": None, "grader_type": None,
         "multi_turn": None, "grading_timeout_s": None, "audit_rules_replace": False}
METHOD_HOOKS = ("setup_runtime", "on_turn_complete", "reference_solution", "controls", "verifiers",
                "rubric", "audit_rules", "original_file")


def test_every_optional_task_hook_is_declared_on_task_and_read_as_an_attribute():
    """A hook found with ``getattr(task, name, default)`` is a contract nobody can read; each is
    declared on ``Task`` with its default, and the library reads it as an attribute."""
    from proofgym.core import Task

    assert {name: getattr(Task, name) for name in HOOKS} == HOOKS
    undocumented = [name for name in METHOD_HOOKS if not getattr(Task, name).__doc__]
    assert not undocumented
    source = (PACKAGE / "core" / "task.py").read_text()
    assert all(f"\n    {name}: " in source for name in HOOKS)  # declared (with its comment) on Task
    hooks, lookups = {*HOOKS, *METHOD_HOOKS}, []
    for module, path in MODULES.items():
        for node in _walk(path.read_text()):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("getattr", "hasattr") and len(node.args) >= 2
                    and "task" in ast.unparse(node.args[0]).lower()
                    and isinstance(node.args[1], ast.Constant) and node.args[1].value in hooks):
                lookups.append(f"{module}: {ast.unparse(node)}")
    assert not lookups, lookups
# ------------------------------------------------------------ episodes: one model
#: The one planned-episode type and the one step recorder (``proofgym.rollout.recorder``).
EPISODE_MODULE = "proofgym.rollout.recorder"
#: Step records: what a recorder appends, one per env step.
_STEP_TYPES = ("StepRecord", "TraceStep")


def _class_fields(node: ast.ClassDef) -> set[str]:
    """Names a class declares: annotated class attributes and ``self.X = ...`` in its methods."""
    names = {n.target.id for n in node.body
             if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    for sub in ast.walk(node):
        if isinstance(sub, (ast.Assign, ast.AnnAssign)):
            targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
            names |= {t.attr for t in targets if isinstance(t, ast.Attribute)
                      and isinstance(t.value, ast.Name) and t.value.id == "self"}
    return names


def _makes_step(node: ast.AST) -> bool:
    """A call building a step record (``StepRecord(...)`` / ``TraceStep(...)``)."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return (func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")) in _STEP_TYPES


def episode_model_rivals(sources: dict[str, str]) -> list[str]:
    """Every place in ``sources`` (module name -> text) outside :data:`EPISODE_MODULE` that
    defines a planned-episode type or records steps itself.

    * a planned-episode type: a class declaring both ``task_id`` and ``attempt`` (as annotated
      attributes, dataclass fields or ``self.`` attributes), or a ``Protocol`` of them;
    * a step recorder: code that constructs a step record (``StepRecord(...)``) at all, or
      appends/extends/``+=`` a ``TraceStep(...)`` onto a list (a trace grown step by step).
      A literal one-step trace (``Trace([TraceStep(a, o)])``, grading a single completion) is
      not a recorder; neither is the record's own reader (``Trajectory.trace``).
    """
    found = []
    for module, text in sources.items():
        if module == EPISODE_MODULE:
            continue
        for node in _walk(text):
            where = f"{module}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.ClassDef) and {"task_id", "attempt"} <= _class_fields(node):
                found.append(f"{where}: planned-episode type {node.name} (use rollout.recorder.EpisodePlan)")
            elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "StepRecord":
                found.append(f"{where}: builds a StepRecord (record steps with EpisodeRecorder.step)")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in ("append", "extend", "insert") \
                    and any(_makes_step(sub) for arg in node.args for sub in ast.walk(arg)):
                found.append(f"{where}: appends a step to a trace (record steps with EpisodeRecorder.step)")
            elif isinstance(node, ast.AugAssign) and any(_makes_step(sub) for sub in ast.walk(node.value)):
                found.append(f"{where}: grows a trace by += (record steps with EpisodeRecorder.step)")
    return found


def test_one_planned_episode_type_and_one_step_recorder():
    """Every front door (``evaluate``, ``run_episode``, serve's sessions and episode tier, the TRL
    adapter) plans with ``EpisodePlan`` and records with ``EpisodeRecorder``; nothing in the
    library or the benches grows a second one."""
    sources = _library_and_bench_sources()
    assert episode_model_rivals(sources) == []
    recorder = sources[EPISODE_MODULE]
    assert "class EpisodePlan" in recorder and "class EpisodeRecorder" in recorder
    # the front doors use it (a scan of modules that never record would pass anything)
    for door in ("proofgym.rollout.orchestrator", "proofgym.serve.session",
                 "proofgym.integrations.trl.environment"):
        assert re.search(r"\brecorder\.step\(|\bself\._recorder\.step\(", sources[door]), door


@pytest.mark.parametrize("rival", [
    "@dataclass(frozen=True)\nclass _Planned:\n    task_id: str\n    attempt: int\n",
    "class Planned(Protocol):\n    task_id: str\n    attempt: int\n",
    "class Spec:\n    def __init__(self, t, a):\n        self.task_id = t\n        self.attempt = a\n",
    "def rec(traj, a, o):\n    traj.steps.append(StepRecord(a, o))\n",
    "def rec(trace, a, o):\n    trace.append(TraceStep(a, o))\n",
    "def rec(trace, a, o):\n    trace += [TraceStep(a, o)]\n",
    "def rec(trace, pairs):\n    trace.extend(TraceStep(a, o) for a, o in pairs)\n",
])
def test_a_second_episode_model_is_caught(rival: str):
    """Each kind of rival (a plan type, a step recorder) fails the check above."""
    module = "proofgym.eval.report"
    original = MODULES[module].read_text()
    assert episode_model_rivals({module: original}) == []
    found = episode_model_rivals({module: original + "\n\n" + rival})
    assert len(found) >= 1 and all(f.startswith(f"{module}:") for f in found), found


# ------------------------------------------------------------ the run's decisions
DEFAULTS_MODULE = "proofgym.core.defaults"
BACKENDS = {"process", "inline", "ray"}


def _backend_name(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value in BACKENDS


def backend_defaults(sources: dict[str, str]) -> list[str]:
    """Places that pick a verifier backend themselves: a backend name as a parameter's or a
    field's default, as the backend a pool is made with, or chosen by ``x if c else y`` /
    ``x or y`` (comparing a name with one, ``backend == "ray"``, decides nothing)."""
    found = []
    for module, text in sources.items():
        if module == DEFAULTS_MODULE:
            continue
        for node in _walk(text):
            where = f"{module}:{getattr(node, 'lineno', '?')}"
            picked: list[ast.AST | None] = []
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                picked = [*node.args.defaults, *node.args.kw_defaults]
            elif isinstance(node, ast.AnnAssign):
                picked = [node.value]
            elif isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)):
                name = node.func.id if isinstance(node.func, ast.Name) else node.func.attr
                if name in ("VerifierPool", "pool_for", "LazyPool"):
                    picked = [*node.args[:1], *(k.value for k in node.keywords if k.arg == "backend")]
            elif isinstance(node, ast.IfExp):
                picked = [node.body, node.orelse]
            elif isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
                picked = node.values
            found += [f"{where}: {ast.unparse(node)[:120]}" for value in picked if _backend_name(value)][:1]
    return found


def test_one_function_holds_the_verifier_backend_default():
    """``RunDefaults.verifier_backend`` is where a run's grading backend is decided; the CLI,
    ``evaluate()``, ``validate()``, ``regrade_run()``, the orchestrator, serve and TRL call it.
    (The benches name backends on purpose: they compare them.)"""
    sources = {m: p.read_text() for m, p in MODULES.items()}
    assert backend_defaults(sources) == []
    defaults = sources[DEFAULTS_MODULE]
    assert "def verifier_backend(" in defaults and backend_defaults({"x": defaults}) != []
    readers = {m for m, text in sources.items() if "verifier_backend" in text} - {DEFAULTS_MODULE}
    assert {"proofgym.eval.runner", "proofgym.verify.pool.verifier_pool", "proofgym.cli.validate_cmd",
            "proofgym.cli.verify_cmd", "proofgym.cli.eval_cmd", "proofgym.serve.server"} <= readers


@pytest.mark.parametrize("second_road", [
    'def grade(jobs, backend="process"):\n    pass\n',
    'def grade(jobs, *, backend: str = "inline"):\n    pass\n',
    'class Config:\n    verifier: str = "process"\n',
    'def grade(jobs):\n    return VerifierPool("inline")\n',
    'def grade(jobs, verifier):\n    return pool_for(verifier or "process")\n',
    'def grade(jobs, concurrency):\n    return "process" if concurrency > 1 else "inline"\n',
])
def test_a_second_backend_default_is_caught(second_road: str):
    module = "proofgym.eval.report"
    original = MODULES[module].read_text()
    assert backend_defaults({module: original}) == []
    (found,) = backend_defaults({module: original + "\n\n" + second_road})
    assert found.startswith(f"{module}:")


def _names(module: str) -> tuple[set[str], set[str]]:
    """The names a module uses and the names and modules it imports."""
    tree = _parse(MODULES[module].read_text())
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | \
        {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    imported = {a.name for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
                for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    return used, imported


def test_the_cli_builds_no_pool():
    """``proofgym eval`` parses, calls ``evaluate()`` and prints: the pool, the failed run and
    the error budget are the library's (a library caller gets the same run); no command makes
    a verifier pool of its own."""
    commands = [m for m in MODULES if m.startswith("proofgym.cli.")]
    assert "proofgym.cli.eval_cmd" in commands and len(commands) > 10
    for module in commands:
        used, imported = _names(module)
        assert not {"VerifierPool", "pool_for"} & (used | imported), module
    used, imported = _names("proofgym.cli.eval_cmd")
    assert not {"Orchestrator", "judge_run", "proofgym.verify.pool"} & (used | imported)
    assert "evaluate" in imported and "max_error_rate" in used
