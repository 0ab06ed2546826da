"""The programs that run inside sandboxes (``proofgym/programs/``), as the host side reads them.

A program there runs on the standard library only, in a sandbox's interpreter or as a small
process of its own (the spawner), so the library never imports one: it reads the file (its path,
its source) and sends or runs it. What both sides must agree on (a protocol's magic bytes, an
error text) is written once, as a one-line literal in the program, and read from its source here
(:func:`constant`); ``tests/test_architecture.py`` checks that no module of the library imports a
program.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path
from typing import TypeVar

from proofgym.core.errors import SandboxError

#: ``proofgym/programs/``: files, not a package (it has no ``__init__.py``).
PROGRAMS = Path(__file__).resolve().parents[1] / "programs"

_T = TypeVar("_T")


def path(name: str) -> Path:
    """The file of program ``name`` (``"supervisor"``, ``"spawner"``, ...)."""
    return PROGRAMS / f"{name}.py"


@cache
def source(name: str) -> bytes:
    """The source of program ``name``, as the host sends it."""
    return path(name).read_bytes()


@cache
def _constants(name: str) -> dict[str, object]:
    found: dict[str, object] = {}
    for line in source(name).decode().splitlines():
        variable, sep, value = line.partition(" = ")
        if sep and variable.isidentifier() and variable.isupper():
            try:
                found[variable] = ast.literal_eval(value)
            except (ValueError, SyntaxError):  # not a one-line literal: not a shared constant
                continue
    return found


def constant(name: str, variable: str, kind: type[_T]) -> _T:
    """The module-level constant ``variable`` of program ``name`` (a one-line literal at the
    start of a line, ``NAME = <literal>``), read from its source, never by importing it."""
    value = _constants(name).get(variable)
    if not isinstance(value, kind):
        raise SandboxError(f"program {name}.py has no one-line {kind.__name__} constant {variable}")
    return value
