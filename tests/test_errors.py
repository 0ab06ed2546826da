"""One exception tree: every error class proofgym defines is defined in ``proofgym.core.errors``
(the bottom layer), derives from its layer's base, and is named in ``proofgym.errors``. Found by
reading the source, so a class defined anywhere else cannot be forgotten."""

from __future__ import annotations

import ast
import builtins
import importlib
from pathlib import Path

import pytest

import proofgym
import proofgym.errors as errors
from proofgym.core import errors as core_errors

PACKAGE = Path(proofgym.__file__).resolve().parent
HOME = "proofgym.core.errors"
#: the root's only direct subclasses: one per layer
LAYER_BASES = {"ConfigError", "TaskError", "SandboxError", "VerifyError", "RecordError", "RolloutError",
               "ServeError", "RemoteError"}


def _defined_exceptions() -> list[tuple[str, str]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "data" in path.relative_to(PACKAGE).parts:  # task repositories, not proofgym's code
            continue
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if module.startswith("proofgym.programs."):  # run in sandboxes, never imported
            continue
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                cls = getattr(importlib.import_module(module), node.name)
                if issubclass(cls, BaseException) and not issubclass(cls, Warning):
                    found.append((module, node.name))
    return found


DEFINED = _defined_exceptions()


def test_the_reader_finds_the_classes():
    names = {name for _, name in DEFINED}
    assert {"ProofgymError", "ContractError", "JudgeTimeout", "SandboxSetupError"} <= names


def test_every_error_class_is_defined_in_one_module():
    elsewhere = [f"{module}.{name}" for module, name in DEFINED if module != HOME]
    assert not elsewhere, f"define these in proofgym/core/errors.py (import them where raised): {elsewhere}"


def test_only_the_layer_bases_derive_from_the_root():
    root = errors.ProofgymError
    direct = {cls.__name__ for cls in root.__subclasses__() if cls.__module__.startswith("proofgym")}
    assert direct == LAYER_BASES


@pytest.mark.parametrize(("module", "name"), DEFINED, ids=[n for _, n in DEFINED])
def test_every_error_is_under_a_layer_base_and_named_in_proofgym_errors(module, name):
    cls = getattr(importlib.import_module(module), name)
    assert cls is errors.ProofgymError or any(
        issubclass(cls, getattr(errors, base)) for base in LAYER_BASES), f"{name} is under no layer base"
    assert name in errors.__all__, f"add {name} to proofgym/errors.py"
    assert getattr(errors, name) is cls


def test_errors_names_nothing_else():
    assert set(errors.__all__) == {name for _, name in DEFINED}
    with pytest.raises(AttributeError, match="has no attribute 'NoSuchError'"):
        errors.NoSuchError  # noqa: B018


def test_old_import_locations_name_the_same_class():
    from proofgym.record.contract import ContractError
    from proofgym.runtimes.sandbox import SandboxSetupError
    from proofgym.wire import Code, ServeError

    assert ContractError is errors.ContractError and SandboxSetupError is errors.SandboxSetupError
    assert ServeError is errors.ServeError and Code is core_errors.Code


def test_a_layer_base_catches_its_layer_and_builtin_bases_stay():
    from proofgym.runtimes.sandbox import ImageError

    assert proofgym.ProofgymError is errors.ProofgymError and proofgym.ConfigError is errors.ConfigError
    with pytest.raises(errors.SandboxError):
        raise ImageError("a lock that is not valid TOML")
    with pytest.raises(ValueError):  # callers that caught ValueError still do
        raise ImageError("a lock that is not valid TOML")
    with pytest.raises(errors.RecordError):
        raise errors.ContractError("a contract.json that is not an object")
    with pytest.raises(KeyError):
        raise errors.TaskNotFoundError("no task 'x'")
    assert errors.RunFailedError.exit_code == 1 and errors.TransportError.exit_code == 2


# ------------------------------------------------------------ builtin raises: typed ones instead
#: The builtin errors library code still raises: a TypeError at an API boundary (a caller passed
#: the wrong kind of object), each by module and count. Anything else raises a class of the tree.
ALLOWED_TYPE_ERRORS = {
    "proofgym/core/trace.py": 2,  # a trace step that is not an action or a step record
    "proofgym/env.py": 2,  # options['task'] not a Task; step() with something not an action
    "proofgym/remote/env.py": 2,  # the same two for the remote env
    "proofgym/rollout/async_policy.py": 1,  # an object that is not a policy
    "proofgym/tasks/taskset.py": 1,  # a TaskSet given something not a Task
    "proofgym/tools/tool.py": 3,  # a tool function whose parameters cannot be described to a model
    "proofgym/eval/audit.py": 1,  # a task's audit_rules() returning something not a Rule
    "proofgym/envs/search_qa/faults.py": 1,  # faults= neither a name, a dict nor a FaultProfile
    "proofgym/integrations/trl/data.py": 1,  # a completion TRL passed that is neither text nor messages
    "proofgym/integrations/trl/reward.py": 1,  # the same, in the reward function
    "proofgym/integrations/trl/environment.py": 1,  # environment_factory options that do not hash
    "proofgym/verify/sandboxed/observed.py": 1,  # a value outside the plain-value codec
    "proofgym/verify/sandboxed/program.py": 1,  # argv not a list of strings
    "proofgym/runtimes/sandbox/runtime.py": 1,  # __reduce__: pickle's protocol for "cannot pickle"
}
#: Builtins the language's protocols ask for, not errors of proofgym: ``AttributeError`` from a
#: ``__getattr__``, ``IndexError`` from ``__getitem__``, ``NotImplementedError`` for what a
#: subclass (or Gymnasium's masked ``sample``) does not support, ``OSError`` with the errno of a
#: failed system call, ``SystemExit`` from a worker's signal handler.
PROTOCOL = {
    ("proofgym/__init__.py", "AttributeError"): 1, ("proofgym/rollout/__init__.py", "AttributeError"): 1,
    ("proofgym/testing/sleepy.py", "AttributeError"): 1, ("proofgym/spaces.py", "IndexError"): 1,
    ("proofgym/spaces.py", "NotImplementedError"): 2,
    ("proofgym/verify/graders/matchers.py", "NotImplementedError"): 1,
    ("proofgym/runtimes/sandbox/scratch.py", "OSError"): 1,
    ("proofgym/verify/pool/worker.py", "SystemExit"): 1,
}
_BUILTIN_ERRORS = {name for name, value in vars(builtins).items()
                   if isinstance(value, type) and issubclass(value, BaseException)}


def _builtin_raises() -> dict[tuple[str, str], int]:
    found: dict[tuple[str, str], int] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).as_posix()
        parts = path.relative_to(PACKAGE).parts
        # programs (run in sandboxes on the standard library alone) are not library code
        if "data" in parts or parts[0] == "programs":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Raise) and node.exc is not None:
                target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                if isinstance(target, ast.Name) and target.id in _BUILTIN_ERRORS:
                    found[rel, target.id] = found.get((rel, target.id), 0) + 1
    return found


def test_library_code_raises_typed_errors_and_few_builtins():
    found = _builtin_raises()
    assert ("proofgym/env.py", "TypeError") in found  # the scan sees raises
    type_errors = {rel: n for (rel, name), n in found.items() if name == "TypeError"}
    others = {key: n for key, n in found.items() if key[1] != "TypeError"}
    assert type_errors == ALLOWED_TYPE_ERRORS, "raise a class of proofgym.errors (or justify it here)"
    assert others == PROTOCOL, "raise a class of proofgym.errors instead of a builtin"
    assert sum(type_errors.values()) < 20
