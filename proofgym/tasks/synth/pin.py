"""Pinning a project for a recipe, and fetching many projects' sdists at once.

``pin_project("inflection", "0.5.1")`` asks the index for the sdist and its sha256, fetches and
unpacks it, and reads the layout off the tree (where the tests are, which packages are the
source, whether it is a ``src`` layout): the recipe entry a person would otherwise assemble by
hand. ``fetch_pins`` warms the sdist cache for many projects in parallel, so a run over many
projects does not download them one at a time as its first episodes reach them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from proofgym.core.errors import ConfigError
from proofgym.tasks.synth.discover import list_test_files
from proofgym.tasks.synth.fetch import FetchError, cache_dir, fetch_sdist, sdist_url, unpack
from proofgym.tasks.synth.recipe import ProjectPin

#: Parallel downloads by default: enough to hide each request's latency, few enough not to look
#: like abuse to the index.
FETCH_JOBS = 8
_TEST_DIRS = ("tests", "test", "testing")
_NOT_SOURCE = frozenset({"tests", "test", "testing", "docs", "doc", "examples", "example", "benchmarks",
                         "bench", "scripts", "tools", "build", "dist"})
_NOT_MODULES = frozenset({"setup.py", "conftest.py", "noxfile.py", "tasks.py", "fabfile.py"})


def detect_layout(top: Path) -> dict[str, list[str]]:
    """The recipe's ``tests``, ``source`` and ``python_path`` for the unpacked sdist ``top``.

    Source: the top-level packages (directories with ``__init__.py``) and modules of ``src/`` if
    there is one (then ``python_path`` is ``["src"]``), else of the top directory, leaving out
    tests, docs, examples and build scripts (``setup.py``, ``conftest.py``, ``noxfile.py``...);
    where there are packages, loose modules beside them are taken for scripts.
    Tests: a top-level ``tests``/``test``/``testing`` directory, else test directories inside the
    packages, else top-level ``test_*.py`` files. Raises :class:`FetchError` naming what is
    missing when no source or no test is found: such a project needs a hand-written entry.
    """
    src = top / "src"
    base, python_path = (src, ["src"]) if src.is_dir() and _packages(src) else (top, [])
    found = _packages(base)
    if any(not n.endswith(".py") for n in found):  # packages: loose modules beside them are scripts
        found = [n for n in found if not n.endswith(".py")]
    source = [str((base / name).relative_to(top)) for name in found]
    tests = [d for d in _TEST_DIRS if (top / d).is_dir() and list_test_files(top, [d])]
    if not tests:
        inner = (str(p.relative_to(top)) for pkg in source for p in (top / pkg).glob("*")
                 if p.is_dir() and p.name in _TEST_DIRS)
        tests = sorted(d for d in inner if list_test_files(top, [d]))
    if not tests:
        tests = sorted(p.name for p in top.glob("test*.py") if p.is_file())
        source = [s for s in source if s not in tests]
    missing = [what for what, found in (("source package or module", source), ("tests", tests)) if not found]
    if missing:
        raise FetchError(f"{top.name}: found no {' and no '.join(missing)} in the sdist; write its recipe "
                         "entry by hand (tests, source, python_path)")
    return {"tests": tests, "source": source, "python_path": python_path}


def _packages(base: Path) -> list[str]:
    out = []
    for entry in sorted(base.iterdir()):
        name = entry.name
        if name.startswith((".", "_")) or name in _NOT_SOURCE or name.endswith(".egg-info"):
            continue
        package = entry.is_dir() and (entry / "__init__.py").is_file()
        module = (entry.is_file() and name.endswith(".py") and not name.startswith("test")
                  and name not in _NOT_MODULES)
        if package or module:
            out.append(name)
    return out


def pin_project(name: str, version: str, *, split: str = "train", quiet: bool = True) -> ProjectPin:
    """The recipe entry of ``name==version``: its sdist's URL and sha256 from the index, and the
    layout read off the unpacked tree (:func:`detect_layout`)."""
    url, sha256 = sdist_url(name, version)
    sdist = fetch_sdist(name, version, sha256, url, quiet=quiet)
    top = unpack(sdist, cache_dir() / "src" / f"{name}-{version}-{sha256[:12]}")
    layout = detect_layout(top)
    return ProjectPin(name=name, version=version, sha256=sha256, url=url, split=split,
                      tests=tuple(layout["tests"]), source=tuple(layout["source"]),
                      python_path=tuple(layout["python_path"]))


def fetch_pins(pins: Iterable[ProjectPin], *, jobs: int = FETCH_JOBS,
               on_done: Callable[[ProjectPin, Path | FetchError], None] | None = None,
               ) -> Mapping[str, Path | FetchError]:
    """Each pin's sdist, fetched (or found in the cache) ``jobs`` at a time, verified against its
    sha256. A project that cannot be fetched maps to its :class:`FetchError` (the others still
    arrive); ``on_done`` is called as each one finishes, from a worker thread."""
    pins = list(pins)
    if jobs < 1:
        raise ConfigError(f"jobs must be >= 1 (got {jobs})")

    def one(pin: ProjectPin) -> Path | FetchError:
        try:
            got: Path | FetchError = fetch_sdist(pin.name, pin.version, pin.sha256, pin.url, quiet=True)
        except FetchError as exc:
            got = exc
        if on_done is not None:
            on_done(pin, got)
        return got

    workers = max(1, min(jobs, len(pins), (os.cpu_count() or 1) * 8))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="proofgym-fetch") as pool:
        return dict(zip((p.name for p in pins), pool.map(one, pins), strict=True))


class SdistPrefetch:
    """The sdists of a task set's projects, fetched together the first time any is needed.

    A run over many projects otherwise downloads each project's sdist when its first episode
    reaches it, one project after another. :meth:`wait` for a pin whose sdist is not in the cache
    starts :func:`fetch_pins` of every pin of the set not in the cache, that pin first, in the
    background (once), then waits for that pin's own download only; a cached pin starts nothing
    (a warm or offline cache never reaches the index). A failed prefetch is not an error here:
    the caller's own fetch then reports it. Pickles as its pins alone.
    """

    def __init__(self, pins: Iterable[ProjectPin], *, jobs: int = FETCH_JOBS) -> None:
        import threading

        self.pins = tuple({p.key: p for p in pins}.values())
        self.jobs = jobs
        self._lock = threading.Lock()
        self._futures: dict[str, Any] | None = None

    def wait(self, pin: ProjectPin) -> None:
        from concurrent.futures import Future

        if _cached(pin):
            return
        with self._lock:
            if self._futures is None:
                # the pin asked for first: its episode waits for it, the rest need not be ahead
                missing = [pin, *(p for p in self.pins if p.key != pin.key and not _cached(p))]
                self._futures = {p.key: Future() for p in missing}
                futures = self._futures

                def resolve(done: ProjectPin, got: Path | FetchError) -> None:
                    futures[done.key].set_result(got)

                import threading

                threading.Thread(target=fetch_pins, args=(missing,),
                                 kwargs={"jobs": self.jobs, "on_done": resolve},
                                 name="proofgym-prefetch", daemon=True).start()
            future = self._futures.get(pin.key)
        if future is not None:
            future.result()

    def __getstate__(self) -> dict[str, Any]:
        return {"pins": self.pins, "jobs": self.jobs}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["pins"], jobs=state["jobs"])  # type: ignore[misc]


def _cached(pin: ProjectPin) -> bool:
    return any((cache_dir() / "sdists").glob(f"{pin.sha256}-*"))
