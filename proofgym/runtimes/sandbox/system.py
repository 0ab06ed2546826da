"""The read-only minimal system a sandbox sees: a shell, core utilities, Python and a few
Python packages, and nothing else of the host.

Not the host's ``/usr`` either (gigabytes of unrelated software): each tool in
:data:`SYSTEM_TOOLS` that exists on the host appears at ``/usr/bin/NAME``, with exactly the shared
libraries ``ldd`` says it and the interpreter's extension modules need.

Why not the host's Python prefix: its ``site-packages`` holds every installed package, proofgym
included (and with it the hidden tests of bundled tasks). Instead the interpreter, its standard
library and shared library appear under ``/opt/python``, whose ``site-packages`` holds only the
packages a task's tests need (by default pytest and its dependencies).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable

from proofgym.core.errors import SandboxSetupError as SandboxSetupError
from proofgym.runtimes.private_dirs import owned_entry, state_dir, write_atomic

#: Packages the tests of a Python repository need: pytest and what it imports.
PYTEST_PACKAGES = ("pytest", "_pytest", "py", "pluggy", "iniconfig", "packaging", "pygments")

#: Command-line tools offered in the sandbox (those missing on the host are left out).
SYSTEM_TOOLS = (
    "bash", "sh", "dash", "ls", "cat", "cp", "mv", "rm", "mkdir", "rmdir", "touch", "head", "tail",
    "wc", "sort", "uniq", "cut", "tr", "tee", "env", "dirname", "basename", "stat", "chmod", "ln",
    "readlink", "realpath", "pwd", "mkfifo", "echo", "printf", "test", "[", "true", "false", "sleep",
    "timeout", "nproc", "id", "date", "seq", "yes", "du", "df", "mktemp", "xargs", "base64",
    "md5sum", "sha256sum", "cmp", "diff", "patch", "grep", "egrep", "fgrep", "sed", "awk", "find",
    "ps", "kill", "which", "tar", "gzip", "gunzip", "zcat", "nl", "od", "paste", "comm", "expr",
    "fold", "join", "split", "tac", "rev", "less", "more", "hostname", "uname", "whoami",
    "setsid", "nohup", "ip",
)

SANDBOX_PYTHON = "/opt/python"
#: The interpreter's RUNPATH may name the host prefix; the loader is pointed here instead.
SANDBOX_PYLIB = f"{SANDBOX_PYTHON}/lib"

#: Host files under /etc that programs need to run (never the rest of /etc).
_ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime")


#: The staged tree: ``sys/{usr,opt,etc}`` and an empty ``empty/``. Each sandbox sees ``sys``
#: through a read-only overlay ``lowerdir=sys:empty`` of its own, so the sandbox's mountinfo
#: shows ``/usr``, not the host path of the staged tree.
_LAYOUT = b"layout 2: sys/ + empty/\n"


@runtime_checkable
class SandboxSystem(Protocol):
    """What a sandbox runs on: :class:`MinimalSystem` (the default), or an environment image
    (:class:`~proofgym.runtimes.sandbox.images.PackagesImage`,
    :class:`~proofgym.runtimes.sandbox.images.OciImage`).

    ``bwrap_args()`` binds the system's top-level entries from ``ROOT/sys/NAME`` to ``/NAME``,
    where ``ROOT`` is a *mount root*: a directory holding ``sys/`` (where the spawner mounts
    the system, read-only, in the sandbox's own mount namespace), ``empty/``, and optionally a
    ``lowerdir`` file naming the overlay's lower layers relative to ``ROOT`` (topmost first;
    without it ``sys:empty``). ``path`` is the sandbox's ``PATH``, ``env`` the other variables
    the system needs, ``python`` the interpreter the supervisor and the grading runner use;
    ``host_python`` says whether that is the host's own interpreter (its ``marshal`` format
    matches); ``digest`` names the content, ``describe()`` is what the rollout contract holds.
    """

    @property
    def digest(self) -> str: ...

    @property
    def path(self) -> str: ...

    @property
    def env(self) -> Mapping[str, str]: ...

    @property
    def python(self) -> str: ...

    @property
    def host_python(self) -> bool: ...

    def bwrap_args(self) -> list[str]: ...

    def describe(self) -> dict[str, Any]: ...


def staged_bwrap_args(root: Path) -> list[str]:
    """bwrap arguments for a staged tree at ``root`` (``sys/{usr,opt,etc}``): the host's
    ``/bin``-style links as links, the three trees read-only."""
    args = []
    for name in ("bin", "lib", "lib64", "sbin"):
        link = Path("/") / name
        if link.is_symlink():
            args += ["--symlink", str(link.readlink()), f"/{name}"]
    for top in ("usr", "opt", "etc"):
        args += ["--ro-bind", str(root / "sys" / top), f"/{top}"]
    return args


#: What a staged system (the minimal one, or a packages image over it) offers: ``PATH``, the
#: variables its interpreter needs, the interpreter, and that it is the host's interpreter.
STAGED_PATH = f"{SANDBOX_PYTHON}/bin:/usr/bin"
STAGED_ENV: Mapping[str, str] = MappingProxyType({"LD_LIBRARY_PATH": SANDBOX_PYLIB})
STAGED_PYTHON = f"{SANDBOX_PYTHON}/bin/python3"


@dataclass(frozen=True)
class MinimalSystem:
    """The read-only system of a sandbox, staged once as a small directory tree.

    ``files`` maps sandbox paths to host files. They are hard-linked (or, across file systems,
    copied) into a content-keyed directory of the user's private state (``system/`` of
    :func:`~proofgym.runtimes.private_dirs.state_root`), whose ``sys/`` the sandbox
    mounts as ``/usr``, ``/opt`` and ``/etc``: three mounts instead of one per file (bubblewrap spends
    about half a millisecond per mount), and nothing else of the host is reachable.

    Invariant: every file staged is a tool of :data:`SYSTEM_TOOLS`, a shared library one of them
    or the interpreter loads, the interpreter and its standard library (without its test suite
    and ``site-packages``), a file under ``/etc`` listed above, or a file of a package named in
    ``packages``. The host's home, the project checkout and the host ``site-packages`` are never
    staged.
    """

    packages: tuple[str, ...] = PYTEST_PACKAGES
    files: tuple[tuple[str, str], ...] = field(default=(), compare=False, repr=False)
    root: Path = field(default=Path("/nonexistent"), compare=False)

    @classmethod
    @cache
    def default(cls, packages: tuple[str, ...] = PYTEST_PACKAGES) -> MinimalSystem:
        # Listing the files runs ldd over ~100 binaries (about a second); the list is kept next
        # to the staged trees, keyed by everything it depends on, so later processes skip it.
        # Both live in the user's private state (private_dirs.py): whoever could write them
        # would choose the system every sandbox runs.
        home = state_dir("system")
        index = home / f"index-{_inputs_key(packages)}.json"
        try:
            data = json.loads(index.read_text())
            name = data["root"]
            root = home / name
            if name.startswith("proofgym-system-") and "/" not in name and _complete(root):
                return cls(packages, tuple(map(tuple, data["files"])), root)
        except (OSError, ValueError, KeyError, TypeError):
            pass
        files = tuple(_system_files(packages))
        root = _stage(files, home)
        write_atomic(index, json.dumps({"root": root.name, "files": files}).encode())
        return cls(packages, files, root)

    def bwrap_args(self) -> list[str]:
        return staged_bwrap_args(self.root)

    path, env, python, host_python = STAGED_PATH, STAGED_ENV, STAGED_PYTHON, True

    @property
    def digest(self) -> str:
        """The staged tree's key (from the host files it holds: their paths, sizes and times)."""
        return "staged:" + self.root.name.rsplit("-", 1)[-1]

    def describe(self) -> dict[str, Any]:
        return {"kind": "minimal", "digest": self.digest, "packages": list(self.packages)}


def mount_root_of(options: Sequence[str]) -> str | None:
    """The mount root (see :class:`~proofgym.runtimes.sandbox.system.SandboxSystem`) behind
    ``--ro-bind ROOT/sys/NAME /NAME``, if any."""
    for i in range(len(options) - 2):
        if options[i] == "--ro-bind" and options[i + 2].count("/") == 1:
            src, dest = Path(options[i + 1]), options[i + 2]
            root = src.parent.parent
            if src.parent.name == "sys" and f"/{src.name}" == dest \
                    and (root / "empty").is_dir() and (root / "sys").is_dir():
                return str(root)
    return None


#: The lower layers' names a mount root's ``lowerdir`` file may hold (relative, no ``..``).
_LOWER_NAME = re.compile(r"[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*")


def system_lowers(root: str) -> str:
    """The overlay lowers of the system at the mount root ``root``: its ``lowerdir`` file, or
    ``sys:empty`` (the staged minimal system)."""
    try:
        text = Path(root, "lowerdir").read_text().strip()
    except FileNotFoundError:
        return "sys:empty"
    names = text.split(":")
    if not names or not all(_LOWER_NAME.fullmatch(n) and ".." not in n.split("/") for n in names):
        raise SandboxSetupError(f"{root}/lowerdir must name the system's layers relative to "
                                f"{root}, separated by ':'; it holds {text!r}")
    return text


def _inputs_key(packages: tuple[str, ...]) -> str:
    """Changes whenever the tools, the interpreter, its standard library or the packages do."""
    digest = hashlib.sha256(repr((sys.executable, sys.version, packages, SYSTEM_TOOLS, _LAYOUT)).encode())
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    paths = [Path(sys.executable).resolve(), stdlib, stdlib / "lib-dynload", Path("/usr/bin"),
             Path("/usr/lib/x86_64-linux-gnu"), Path("/etc/ld.so.cache")]
    for name in packages:
        spec = importlib.util.find_spec(name)
        paths.append(Path(spec.origin) if spec and spec.origin else Path(name))
    for p in paths:
        try:
            st = p.stat()
            digest.update(f"{p}\0{st.st_mtime_ns}\0{st.st_size}\n".encode())
        except OSError:
            digest.update(f"{p}\0missing\n".encode())
    return digest.hexdigest()[:20]


def _complete(root: Path) -> bool:
    """Whether ``root`` is a staged tree this user finished (its own, and marked complete)."""
    return owned_entry(root) and owned_entry(root / ".complete")


def _stage(files: tuple[tuple[str, str], ...], home: Path) -> Path:
    """The staged tree for ``files`` (``(sandbox path, host path)``) in ``home``, built once per
    content."""
    digest = hashlib.sha256(_LAYOUT)
    for dest, src in files:
        st = os.stat(src)
        digest.update(f"{dest}\0{src}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    root = home / f"proofgym-system-{digest.hexdigest()[:20]}"
    if _complete(root):
        return root
    tmp = Path(tempfile.mkdtemp(prefix=root.name + ".", dir=home))
    for dest, src in files:
        target = tmp / "sys" / dest.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(src, target)
        except OSError:  # another file system, or hard links not allowed: copy
            shutil.copy2(src, target)
    ver = _version()
    for name in ("python3", "python"):
        (tmp / "sys" / SANDBOX_PYTHON.lstrip("/") / "bin" / name).symlink_to(f"python{ver}")
    for top in ("usr", "opt", "etc"):
        (tmp / "sys" / top).mkdir(parents=True, exist_ok=True)
    (tmp / "empty").mkdir()
    for d in (tmp, *tmp.rglob("*")):
        if d.is_dir() and not d.is_symlink():
            d.chmod(0o755)
    (tmp / ".complete").touch(mode=0o644)  # (a umask of 002 would make it untrusted)
    try:
        tmp.rename(root)
    except OSError:  # built concurrently by another process: keep theirs
        shutil.rmtree(tmp, ignore_errors=True)
    return root


def _version() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def _sandbox_site() -> str:
    return f"{SANDBOX_PYTHON}/lib/python{_version()}/site-packages"


def _system_path(path: str) -> str:
    """``path`` with its directory resolved (``/lib/x86_64-linux-gnu/x`` on a merged-/usr host
    becomes ``/usr/lib/x86_64-linux-gnu/x``), so it can be bound under the sandbox's symlinks."""
    return os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))


def _shared_libraries(files: list[str]) -> set[str]:
    """System libraries (under /usr or /lib*) the ELF ``files`` load, from ``ldd``."""
    ldd = shutil.which("ldd")
    if ldd is None or not files:
        raise SandboxSetupError("`ldd` (Debian package libc-bin) is needed to build the sandbox's "
                                "minimal system")
    out = subprocess.run([ldd, *files], capture_output=True, text=True, check=False).stdout
    libs = set()
    for match in re.finditer(r"(/[^\s]+) \(0x", out):
        path = _system_path(match.group(1))
        if path.startswith(("/usr/", "/lib")):
            libs.add(path)
    return libs


def _system_files(packages: tuple[str, ...]) -> list[tuple[str, str]]:
    """``(sandbox path, host path)`` of every file of the minimal system."""
    files: list[tuple[str, str]] = []
    elves = []
    for name in SYSTEM_TOOLS:
        found = shutil.which(name, path="/usr/bin:/bin:/usr/sbin:/sbin")
        if found:
            files.append((f"/usr/bin/{name}", os.path.realpath(found)))
            elves.append(found)
    stdlib = Path(sysconfig.get_paths()["stdlib"]).resolve()
    if not (stdlib / "os.py").exists():
        raise SandboxSetupError(f"cannot find the Python standard library at {stdlib}")
    elves += [sys.executable, *map(str, (stdlib / "lib-dynload").glob("*.so"))]
    files += [(lib, os.path.realpath(lib)) for lib in sorted(_shared_libraries(elves))]
    for name in _ETC_FILES:
        p = Path("/etc") / name
        if p.is_file():
            files.append((f"/etc/{name}", str(p.resolve())))
    ver = _version()
    files.append((f"{SANDBOX_PYTHON}/bin/python{ver}", str(Path(sys.executable).resolve())))
    libdir = sysconfig.get_config_var("LIBDIR")
    ldlib = sysconfig.get_config_var("INSTSONAME")
    if libdir and ldlib and (Path(libdir) / ldlib).exists():
        files.append((f"{SANDBOX_PYLIB}/{ldlib}", str((Path(libdir) / ldlib).resolve())))
    skip = {"site-packages", "dist-packages", "test", "idlelib", "tkinter", "turtledemo", "ensurepip",
            f"config-{ver}-{getattr(sys.implementation, '_multiarch', '')}"}
    dest_lib = f"{SANDBOX_PYTHON}/lib/python{ver}"
    for dirpath, dirnames, filenames in os.walk(stdlib):
        if Path(dirpath) == stdlib:
            dirnames[:] = [d for d in dirnames if d not in skip]
        rel = os.path.relpath(dirpath, stdlib)
        for f in filenames:
            src = os.path.join(dirpath, f)
            if os.path.isfile(src):
                files.append((os.path.normpath(f"{dest_lib}/{rel}/{f}"), src))
    site = _sandbox_site()
    for name in packages:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise SandboxSetupError(
                f"Python package {name!r} is needed inside the sandbox but is not installed; "
                + ("pip install 'proofgym[sandbox]' installs what the sandbox needs"
                   if name in PYTEST_PACKAGES else f"install it (pip install {name})")
                + " (or leave it out of the sandbox's packages)")
        origin = Path(spec.origin).resolve()
        if spec.submodule_search_locations:
            pkg = origin.parent
            if "proofgym" in pkg.parts:
                raise SandboxSetupError(f"refusing to expose {pkg} (part of proofgym) in a sandbox")
            for p in sorted(pkg.rglob("*")):
                if p.is_file():
                    files.append((f"{site}/{pkg.name}/{p.relative_to(pkg).as_posix()}", str(p)))
        else:
            files.append((f"{site}/{origin.name}", str(origin)))
    return files
