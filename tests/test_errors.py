"""One exception tree: every error class proofgym defines derives from ``ProofgymError`` and is
named in ``proofgym.errors`` (found by reading the source, so a new class cannot be forgotten)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import proofgym
import proofgym.errors as errors

PACKAGE = Path(proofgym.__file__).resolve().parent
#: code that runs inside a sandbox on the standard library only (it cannot import proofgym)
SANDBOX_SIDE = {"proofgym.runtimes.sandbox.supervisor", "proofgym.verify.sandboxed.runner"}


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


@pytest.mark.parametrize(("module", "name"), DEFINED, ids=[n for _, n in DEFINED])
def test_every_error_is_in_the_tree_and_named_in_proofgym_errors(module, name):
    cls = getattr(importlib.import_module(module), name)
    assert issubclass(cls, proofgym.ProofgymError), f"{module}.{name} does not derive from ProofgymError"
    assert name in errors.__all__, f"add {name} ({module}) to proofgym/errors.py"
    assert getattr(errors, name) is cls


def test_errors_names_nothing_else():
    defined = {name for _, name in DEFINED}
    assert set(errors.__all__) == defined
    with pytest.raises(AttributeError, match="no attribute 'NoSuchError'"):
        errors.NoSuchError  # noqa: B018


def test_the_root_is_exported_and_catches_a_layer_error():
    from proofgym.record.contract import ContractError

    assert proofgym.ProofgymError is errors.ProofgymError and proofgym.ConfigError is errors.ConfigError
    with pytest.raises(proofgym.ProofgymError):
        raise ContractError("a contract.json that is not an object")
