"""One exception tree: every error class proofgym defines is defined in ``proofgym.core.errors``
(the bottom layer), derives from its layer's base, and is named in ``proofgym.errors``. Found by
reading the source, so a class defined anywhere else cannot be forgotten."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import proofgym
import proofgym.errors as errors
from proofgym.core import errors as core_errors

PACKAGE = Path(proofgym.__file__).resolve().parent
HOME = "proofgym.core.errors"
#: code that runs inside a sandbox on the standard library only (it cannot import proofgym)
SANDBOX_SIDE = {"proofgym.runtimes.sandbox.supervisor", "proofgym.verify.sandboxed.runner"}
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
        if module in SANDBOX_SIDE:
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
    from proofgym.serve.protocol import Code, ServeError

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
