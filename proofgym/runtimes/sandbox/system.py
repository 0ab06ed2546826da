"""The read-only minimal system a sandbox sees: a shell, core utilities, Python and a few
Python packages, and nothing else of the host.

Why not bind the host's Python prefix: its ``site-packages`` holds every installed package,
proofgym included (and with it the hidden tests of bundled tasks). Instead the interpreter, its
standard library and shared library are bound under ``/opt/python``, ``site-packages`` there is an
empty tmpfs, and only the packages a task's tests need (by default pytest and its dependencies)
are bound into it one by one.
"""

from __future__ import annotations

import importlib.util
import sys
import sysconfig
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

#: Packages the tests of a Python repository need: pytest and what it imports.
PYTEST_PACKAGES = ("pytest", "_pytest", "py", "pluggy", "iniconfig", "packaging", "pygments")

SANDBOX_PYTHON = "/opt/python"
#: The interpreter's RUNPATH may name the host prefix; the loader is pointed here instead.
SANDBOX_PYLIB = f"{SANDBOX_PYTHON}/lib"

#: Host files under /etc that programs need to run (never the rest of /etc).
_ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime",
              "nsswitch.conf", "mime.types")


class SandboxSetupError(RuntimeError):
    """The host cannot provide what the sandbox needs (missing tool, package or kernel feature)."""


@dataclass(frozen=True)
class MinimalSystem:
    """Read-only mounts for the sandbox, as ``(host_path, sandbox_path)`` pairs.

    Invariant: every path bound is a system directory (``/usr``), an interpreter file, the
    standard library, a file under ``/etc`` listed above, or a package named in ``packages``.
    The host's home, the project checkout and the host ``site-packages`` are never bound.
    """

    packages: tuple[str, ...] = PYTEST_PACKAGES
    binds: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    @classmethod
    @cache
    def default(cls, packages: tuple[str, ...] = PYTEST_PACKAGES) -> MinimalSystem:
        return cls(packages, tuple(_system_binds(packages)))

    def bwrap_args(self) -> list[str]:
        args = ["--ro-bind", "/usr", "/usr"]
        for name in ("bin", "lib", "lib64", "sbin", "lib32", "libx32"):
            link = Path("/") / name
            if link.is_symlink():
                args += ["--symlink", str(link.readlink()), f"/{name}"]
            elif link.is_dir():
                args += ["--ro-bind", str(link), f"/{name}"]
        site = _sandbox_site()
        for host, dest in self.binds:
            if dest == site:
                args += ["--tmpfs", site]
                continue
            args += ["--ro-bind", host, dest]
        args += ["--remount-ro", site]
        for name in ("python3", "python"):
            args += ["--symlink", f"python{_version()}", f"{SANDBOX_PYTHON}/bin/{name}"]
        return args

    @property
    def path(self) -> str:
        return f"{SANDBOX_PYTHON}/bin:/usr/local/bin:/usr/bin:/bin"


def _version() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def _sandbox_site() -> str:
    return f"{SANDBOX_PYTHON}/lib/python{_version()}/site-packages"


def _system_binds(packages: tuple[str, ...]) -> list[tuple[str, str]]:
    binds: list[tuple[str, str]] = []
    for name in _ETC_FILES:
        p = Path("/etc") / name
        if p.exists():
            binds.append((str(p), f"/etc/{name}"))
    exe = Path(sys.executable).resolve()
    ver = _version()
    binds.append((str(exe), f"{SANDBOX_PYTHON}/bin/python{ver}"))
    stdlib = Path(sysconfig.get_paths()["stdlib"]).resolve()
    if not (stdlib / "os.py").exists():
        raise SandboxSetupError(f"cannot find the Python standard library at {stdlib}")
    binds.append((str(stdlib), f"{SANDBOX_PYTHON}/lib/python{ver}"))
    libdir = sysconfig.get_config_var("LIBDIR")
    ldlib = sysconfig.get_config_var("INSTSONAME")
    if libdir and ldlib and (Path(libdir) / ldlib).exists():
        binds.append((str(Path(libdir) / ldlib), f"{SANDBOX_PYLIB}/{ldlib}"))
    site = _sandbox_site()
    binds.append(("", site))  # the empty tmpfs the packages are bound into
    for name in packages:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise SandboxSetupError(
                f"Python package {name!r} is needed inside the sandbox but is not installed; "
                f"install it (pip install {name}) or leave it out of the sandbox's packages")
        origin = Path(spec.origin)
        src = origin.parent if spec.submodule_search_locations else origin
        if "proofgym" in src.parts:
            raise SandboxSetupError(f"refusing to expose {src} (part of proofgym) in a sandbox")
        binds.append((str(src), f"{site}/{src.name}"))
    return binds
