"""A packages image: the minimal system plus Python packages installed from pinned wheels.

The lock (:class:`WheelLock`) pins every package by name, version and the sha256 of its
wheel; :func:`lock_packages` makes one from unpinned names (``pip download`` resolves them and
their dependencies, then each wheel is hashed). Building (:meth:`PackagesImage.build`) fetches
the wheels with ``pip download --require-hashes --only-binary :all: --no-deps`` and installs
them with ``pip install --require-hashes --no-index --no-deps --target`` into a layer of its
own, which the sandbox sees as its interpreter's ``site-packages`` over the minimal system
staged *without* any host package: nothing comes from the host's ``site-packages``, pytest
included (lock it when the tests need it).

The digest is the sha256 of the lock's canonical text and the base system's key, so the same
lock on the same host names the same image, and any change of a pin changes it.

An image made for a project (``project=``, ``modules=``: the checkout the workspace holds) never
installs it: a lock pinning the project, or a distribution installing one of its top-level
modules, is refused (see :mod:`.modules`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from proofgym.core.errors import ImageError as ImageError
from proofgym.runtimes.sandbox.images.cache import build_once, cache_root, mount_root, write_record
from proofgym.runtimes.sandbox.images.modules import installed_modules, own_module_refusal, wheel_modules
from proofgym.runtimes.sandbox.system import (
    SANDBOX_PYTHON,
    STAGED_ENV,
    STAGED_PATH,
    STAGED_PYTHON,
    MinimalSystem,
    staged_bwrap_args,
)

__all__ = ["ImageError", "PackagesImage", "Pin", "WheelLock", "lock_packages"]

Progress = Callable[[str], None]
_WHEEL = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)(-\d[^-]*)?-[^-]+-[^-]+-[^-]+\.whl$")
_LINE = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[^\s;]+)"
                   r"(?P<hashes>(\s+--hash=sha256:[0-9a-f]{64})+)\s*$")


def canonical_name(name: str) -> str:
    """A package's name as PyPI compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True, order=True)
class Pin:
    """One locked package: ``name==version`` and the sha256 digests its wheel may have."""

    name: str
    version: str
    sha256: tuple[str, ...]

    def line(self) -> str:
        return f"{self.name}=={self.version} " + " ".join(f"--hash=sha256:{h}" for h in self.sha256)


@dataclass(frozen=True)
class WheelLock:
    """Pinned wheels, sorted by name: the content of a packages image.

    Its text form (:meth:`to_text`, :meth:`parse`) is a pip requirements file with one
    ``name==version --hash=sha256:...`` line per package (comments and blank lines allowed).
    """

    pins: tuple[Pin, ...]

    def __post_init__(self) -> None:
        pins = tuple(sorted(Pin(canonical_name(p.name), p.version, tuple(sorted(set(p.sha256))))
                            for p in self.pins))
        names = [p.name for p in pins]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ImageError(f"a lock pins each package once; {dup} appear more than once")
        if any(not p.sha256 for p in pins):
            raise ImageError("every pin needs at least one sha256 (use lock_packages to make them)")
        object.__setattr__(self, "pins", pins)

    @classmethod
    def parse(cls, text: str, *, source: str = "the lock") -> WheelLock:
        pins = []
        for number, raw in enumerate(text.replace("\\\n", " ").splitlines(), 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            m = _LINE.match(line)
            if m is None:
                raise ImageError(f"{source}, line {number}: {raw.strip()!r} is not a pin; write "
                                 "'name==version --hash=sha256:<64 hex digits>' (make one with "
                                 "`proofgym image lock NAME...`)")
            hashes = tuple(re.findall(r"sha256:([0-9a-f]{64})", m["hashes"]))
            pins.append(Pin(m["name"], m["version"], hashes))
        if not pins:
            raise ImageError(f"{source} pins no package")
        return cls(tuple(pins))

    @classmethod
    def load(cls, path: str | Path) -> WheelLock:
        path = Path(path)
        try:
            return cls.parse(path.read_text(), source=str(path))
        except FileNotFoundError:
            raise ImageError(f"lock file {path} does not exist") from None

    def to_text(self) -> str:
        return "".join(p.line() + "\n" for p in self.pins)

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.to_text().encode()).hexdigest()

    def names(self) -> list[str]:
        return [f"{p.name}=={p.version}" for p in self.pins]


def _pip(args: Sequence[str], progress: Progress | None, what: str) -> None:
    cmd = [sys.executable, "-m", "pip", "--isolated", "--disable-pip-version-check",
           "--no-input", *args]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        tail = " | ".join(line.strip() for line in
                          (proc.stderr or proc.stdout).strip().splitlines()[-4:])
        raise ImageError(f"{what} failed (pip exit {proc.returncode}): {tail}")
    if progress is not None:
        for line in proc.stdout.splitlines():
            if line.startswith(("Saved ", "Collecting ", "Successfully", "File was already")):
                progress(f"  pip: {line.strip()}")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _links(find_links: Iterable[str | Path]) -> list[str]:
    out = []
    for link in find_links:
        out += ["--no-index", "--find-links", str(link)]
    return out


def lock_packages(requirements: Sequence[str], *, find_links: Sequence[str | Path] = (),
                  progress: Progress | None = None) -> WheelLock:
    """Pin ``requirements`` (``"pytest"``, ``"attrs>=23"``) and their dependencies: resolved
    by ``pip download --only-binary :all:`` (from PyPI, or only from the wheel directories
    ``find_links``), each wheel then hashed. The wheels are kept in the cache."""
    if not requirements or not all(isinstance(r, str) and r.strip() for r in requirements):
        raise ImageError(f"lock_packages needs package names; got {list(requirements)!r}")
    wheels = cache_root() / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".lock-", dir=wheels) as tmp:
        if progress:
            progress(f"resolving {' '.join(requirements)} (pip download, wheels only)")
        _pip(["download", "--only-binary", ":all:", "--dest", tmp, *_links(find_links),
              *requirements], progress, f"resolving {' '.join(requirements)}")
        pins = []
        for path in sorted(Path(tmp).iterdir()):
            m = _WHEEL.match(path.name)
            if m is None:
                raise ImageError(f"pip downloaded {path.name}, which is not a wheel")
            pins.append(Pin(m["name"], m["version"], (_sha256(path),)))
            os.replace(path, wheels / path.name)
    lock = WheelLock(tuple(pins))
    if progress:
        progress(f"locked {len(lock.pins)} packages: {' '.join(lock.names())}")
    return lock


@dataclass(frozen=True)
class PackagesImage:
    """The minimal system (no host package) plus the wheels of ``lock`` as the interpreter's
    ``site-packages``. ``find_links``: wheel directories to install from instead of PyPI.

    Use :meth:`build` once (idempotent, cached across runs), then pass the image as
    ``SandboxRuntime(image=...)`` or to a grading (``run_pytest(..., image=...)``).

    ``project`` and ``modules``: the project whose checkout the sandbox's workspace is, and its
    top-level modules. Such an image refuses (:class:`ImageError`, before downloading anything) a
    lock that pins the project itself, and (once installed) one in which any distribution
    installs one of ``modules``: the agent could copy the original source out of
    ``site-packages``.
    """

    lock: WheelLock
    find_links: tuple[str, ...] = field(default=(), compare=False)
    root: Path | None = field(default=None, compare=False, repr=False)
    project: str | None = field(default=None, compare=False)
    modules: tuple[str, ...] = field(default=(), compare=False)

    @classmethod
    def from_requirements(cls, pins: Sequence[str] | Mapping[str, Sequence[str]], *,
                          find_links: Sequence[str | Path] = ()) -> PackagesImage:
        """From ``["name==1.0 --hash=sha256:..."]`` lines, or ``{"name==1.0": [sha256, ...]}``."""
        if isinstance(pins, Mapping):
            text = "".join(f"{req} " + " ".join(f"--hash=sha256:{h}" for h in hashes) + "\n"
                           for req, hashes in pins.items())
        else:
            text = "\n".join(pins)
        return cls(WheelLock.parse(text, source="the requirements"),
                   tuple(str(p) for p in find_links))

    @property
    def base(self) -> MinimalSystem:
        return MinimalSystem.default(())

    @property
    def digest(self) -> str:
        return "sha256:" + hashlib.sha256(
            f"packages-image 1\n{self.lock.to_text()}\0{self.base.digest}".encode()).hexdigest()

    def build(self, progress: Progress | None = None) -> PackagesImage:
        """The image with its layer built (downloaded and installed once, then cached)."""
        if self.root is not None:
            return self
        self.refuse_project_pin()
        hexd = self.digest.split(":", 1)[1]
        site = cache_root() / "sites" / hexd[:32]
        if progress:
            progress(f"packages image {self.digest[:19]}: {len(self.lock.pins)} packages")
        build_once(site, lambda tmp: self._install(tmp, progress))
        self._refuse(installed_modules(_site_packages(site)), "its installed tree")
        root = mount_root(hexd[:20], [site, self.base.root / "sys"])
        write_record(f"packages-{hexd[:20]}", {"kind": "packages", "digest": self.digest,
                                               "packages": self.lock.names(), "path": str(site)})
        if progress:
            progress(f"ready: {self.digest}")
        return replace(self, root=root)

    def refuse_project_pin(self) -> None:
        """Raise :class:`ImageError` when the lock pins the project itself (see the class)."""
        if self.project is None:
            return
        pinned = [p for p in self.lock.pins if p.name == canonical_name(self.project)]
        if pinned:
            raise ImageError(f"project {self.project!r}: its image's lock pins the project itself "
                             f"({pinned[0].name}=={pinned[0].version}), so an agent could copy "
                             "its original source out of site-packages over the workspace. Remove "
                             "the requirement that pulls it in, or drop the project")

    def wheel_modules(self) -> dict[str, frozenset[str]]:
        """``name==version`` -> the top-level modules its wheel installs, for every pin whose
        wheel is in the cache (each checked against its pinned sha256); see :meth:`fetch`."""
        wheels = cache_root() / "wheels"
        out = {}
        for pin in self.lock.pins:
            for path in wheels.glob("*.whl"):
                m = _WHEEL.match(path.name)
                if m and canonical_name(m["name"]) == pin.name and m["version"] == pin.version \
                        and _sha256(path) in pin.sha256:
                    out[f"{pin.name}=={pin.version}"] = wheel_modules(path)
                    break
        return out

    def check_wheels(self) -> None:
        """Refuse (:class:`ImageError`) a lock that pins the project or whose cached wheels
        install one of its modules (wheels not in the cache are checked once installed)."""
        self.refuse_project_pin()
        self._refuse(self.wheel_modules(), "its lock")

    def fetch(self, progress: Progress | None = None) -> None:
        """Download the locked wheels into the cache (``pip download --require-hashes``)."""
        with self._requirements() as (wheels, req):
            self._download(wheels, req, progress)

    @contextlib.contextmanager
    def _requirements(self) -> Iterator[tuple[Path, str]]:
        """The wheel cache and a requirements file of the lock in it, removed afterwards."""
        wheels = cache_root() / "wheels"
        wheels.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", suffix=".txt", dir=wheels, prefix=".req-") as req:
            req.write(self.lock.to_text())
            req.flush()
            yield wheels, req.name

    def _refuse(self, installs: Mapping[str, frozenset[str]], where: str) -> None:
        if self.project is None or not self.modules:
            return
        why = own_module_refusal(installs, self.project, self.modules, f"the image ({where})",
                                 "Remove the requirement that pulls it in from the project's "
                                 "requirements, or drop the project")
        if why:
            raise ImageError(why)

    def _download(self, wheels: Path, req: str, progress: Progress | None) -> None:
        if progress:
            progress("fetching wheels (pip download --require-hashes --no-deps)")
        _pip(["download", "--require-hashes", "--only-binary", ":all:", "--no-deps",
              "--dest", str(wheels), *_links(self.find_links), "-r", req], progress,
             "downloading the locked wheels")

    def _install(self, tmp: Path, progress: Progress | None) -> None:
        with self._requirements() as (wheels, req):
            self._download(wheels, req, progress)
            target = _site_packages(tmp)
            self._refuse(self.wheel_modules(), "its lock")
            if progress:
                progress(f"installing into the image's site-packages ({len(self.lock.pins)} wheels)")
            _pip(["install", "--require-hashes", "--only-binary", ":all:", "--no-deps",
                  "--no-index", "--find-links", str(wheels), "--no-warn-script-location",
                  "--target", str(target), "-r", req], progress, "installing the locked wheels")
        shutil.rmtree(target / "bin", ignore_errors=True)  # scripts name the host's interpreter

    # ------------------------------------------------------------- SandboxSystem
    def _root(self) -> Path:
        if self.root is None:
            raise ImageError("this PackagesImage is not built yet: call image = image.build()")
        return self.root

    def bwrap_args(self) -> list[str]:
        return staged_bwrap_args(self._root())

    path, env, python, host_python = STAGED_PATH, STAGED_ENV, STAGED_PYTHON, True

    def describe(self) -> dict[str, Any]:
        return {"kind": "packages", "digest": self.digest, "packages": self.lock.names(),
                "lock_digest": self.lock.digest, "base": self.base.digest}


def _site_packages(layer: Path) -> Path:
    """The interpreter's ``site-packages`` inside a packages image's layer."""
    ver = f"{sys.version_info.major}.{sys.version_info.minor}"
    return layer / SANDBOX_PYTHON.lstrip("/") / "lib" / f"python{ver}" / "site-packages"
