"""Which top-level modules a distribution installs, and the refusal of an image that installs the
project under test.

A task's workspace is a project's checkout with a bug in it; an image (a sandbox's system) that
also installs one of that project's top-level modules hands the agent the original source: copying
it out of ``site-packages`` over the workspace is a fix the grader cannot tell from a real one.
So an image is checked against the project: neither its lock nor what it installs may name the
project or any of its top-level modules.

The modules come from the wheels' ``RECORD`` (and ``top_level.txt``), or from the installed tree's
``*.dist-info/RECORD`` files and its top-level entries: what the image really holds, not a name.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path

from proofgym.runtimes.sandbox.system import SANDBOX_PYTHON, MinimalSystem

__all__ = ["default_system_modules", "installed_modules", "module_of", "own_module_refusal",
           "wheel_modules"]

#: Suffixes of importable top-level files (an extension module: ``name.cpython-312-x86_64-linux-gnu.so``).
_MODULE_SUFFIXES = (".py", ".pyc", ".so", ".pyd", ".pyi")


def module_of(path: str) -> str | None:
    """The top-level module a file at ``path`` (relative to ``site-packages``, as a ``RECORD``
    names it) belongs to, or ``None`` (metadata, scripts, a ``.pth`` file, ``__pycache__``)."""
    parts = [p for p in path.replace("\\", "/").split("/") if p not in ("", ".")]
    if not parts or parts[0] in ("..", "__pycache__") or parts[0].endswith(".dist-info"):
        return None
    if parts[0].endswith(".data"):  # a wheel's purelib/platlib trees install at the top
        if len(parts) >= 3 and parts[1] in ("purelib", "platlib"):
            return module_of("/".join(parts[2:]))
        return None
    if len(parts) > 1:
        return parts[0]
    name = parts[0]
    return name.split(".", 1)[0] if name.endswith(_MODULE_SUFFIXES) else None


def _record_modules(record: str) -> set[str]:
    out = set()
    for line in record.splitlines():
        name = module_of(line.rsplit(",", 2)[0]) if line.strip() else None
        if name:
            out.add(name)
    return out


def wheel_modules(path: str | Path) -> frozenset[str]:
    """The top-level modules the wheel at ``path`` installs (its ``RECORD``, its file list and
    its ``top_level.txt``)."""
    with zipfile.ZipFile(path) as wheel:
        names = wheel.namelist()
        out = {m for m in map(module_of, names) if m}
        for name in names:
            if name.endswith(".dist-info/top_level.txt"):
                out |= {line.strip().split("/", 1)[0] for line in
                        wheel.read(name).decode("utf-8", "replace").splitlines() if line.strip()}
            elif name.endswith(".dist-info/RECORD"):
                out |= _record_modules(wheel.read(name).decode("utf-8", "replace"))
    return frozenset(out)


def installed_modules(site_packages: Path) -> dict[str, frozenset[str]]:
    """Distribution (``name==version``, as its ``dist-info`` names it) -> the top-level modules
    it installed into ``site_packages``; top-level entries no ``RECORD`` claims are listed under
    ``"(no distribution)"``."""
    out: dict[str, frozenset[str]] = {}
    claimed: set[str] = set()
    for info in sorted(site_packages.glob("*.dist-info")):
        try:
            record = (info / "RECORD").read_text(errors="replace")
        except OSError:
            record = ""
        name, _, version = info.name[:-len(".dist-info")].partition("-")
        modules = frozenset(_record_modules(record))
        out[f"{name}=={version}"] = modules
        claimed |= modules
    stray = {m for m in (module_of(p.name + ("/" if p.is_dir() else "")) for p in site_packages.iterdir())
             if m} - claimed if site_packages.is_dir() else set()
    if stray:
        out["(no distribution)"] = frozenset(stray)
    return out


def default_system_modules() -> dict[str, frozenset[str]]:
    """The top-level modules the default minimal system stages in its ``site-packages`` (from
    its staged files), under one key naming where they come from."""
    modules = set()
    for dest, _src in MinimalSystem.default().files:
        if dest.startswith(f"{SANDBOX_PYTHON}/lib/") and "/site-packages/" in dest:
            name = module_of(dest.split("/site-packages/", 1)[1])
            if name:
                modules.add(name)
    return {"pytest and its dependencies, staged from the host": frozenset(modules)}


def own_module_refusal(installs: Mapping[str, Iterable[str]], project: str,
                       modules: Iterable[str], where: str, remedy: str) -> str | None:
    """Why an image must not serve ``project``, in one line, when a distribution of ``installs``
    (``{distribution: modules}``, from ``where``) installs one of ``modules``, the project's own
    top-level modules; ``None`` when none does. ``remedy``: what to do about it."""
    own = set(modules)
    for dist, installed in sorted(installs.items()):
        clash = sorted(own & set(installed))
        if clash:
            return (f"project {project!r}: {where} installs module(s) {clash} ({dist}), the "
                    "project's own, so an agent could copy its original source out of "
                    f"site-packages over the workspace. {remedy}")
    return None
