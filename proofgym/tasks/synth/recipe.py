"""The recipe of a synthesised task set: pinned projects (sdist hash, where the tests and the
source are, what the image needs) and the seeds of the bug operators. Committed as JSON; the
sdists it names are fetched on first use."""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import orjson

from proofgym.core.errors import RecipeError as RecipeError

RECIPE_VERSION = 1
SPLITS = ("train", "heldout")
#: the keys a ``releases`` entry may set for itself (a release laid out otherwise than the pin)
RELEASE_LAYOUT = ("tests", "source", "python_path")


def plain_fields(obj: Any) -> dict[str, Any]:
    """``dataclasses.asdict`` of a record of plain data (no nested dataclass), as a copy: its
    generic walk (a dataclass check and a ``deepcopy`` call per string of a test-id list) was
    most of a task set's content hashing (every RepoRepair record, at every run start)."""
    return {f.name: _plain_copy(getattr(obj, f.name)) for f in fields(obj)}


def _plain_copy(value: Any) -> Any:
    if isinstance(value, (str, int, float, type(None))):
        return value
    if type(value) in (tuple, list):
        if all(type(v) is str for v in value):  # a test-id list: nothing in it to copy
            return value if type(value) is tuple else list(value)
        return type(value)(_plain_copy(v) for v in value)
    if type(value) is dict:
        return {_plain_copy(k): _plain_copy(v) for k, v in value.items()}
    return copy.deepcopy(value)


@dataclass(frozen=True)
class ProjectPin:
    """One project of a recipe.

    ``tests`` are the test paths (files or directories, relative to the sdist's top directory)
    the suite runs; ``source`` the paths whose ``.py`` files bugs are injected into;
    ``python_path`` directories put on ``sys.path`` (``src`` for a src layout); ``requirements`` the
    Python packages the tests need besides pytest and ``lock`` their pinned wheels (the image,
    see :mod:`.images`); ``split`` ``train`` or ``heldout``
    (held-out projects are never in train); ``seed`` and ``max_candidates`` drive the operators;
    ``max_per_failing_set`` caps the tasks that break the very same tests; ``releases`` pins
    earlier releases of the project (``{"version", "sha256", "url"}``: the ``b`` of release-history
    tasks older than ``version``, see :meth:`at`), laid out as ``version`` is unless the entry
    names its own ``tests``, ``source`` or ``python_path`` (a release from before a move).
    """

    name: str
    version: str
    sha256: str
    url: str | None = None
    tests: tuple[str, ...] = ("tests",)
    source: tuple[str, ...] = ()
    python_path: tuple[str, ...] = ()
    requirements: tuple[str, ...] = ()
    lock: tuple[str, ...] = ()
    deselect: tuple[str, ...] = ()
    split: str = "train"
    seed: int = 0
    max_candidates: int = 300
    max_tasks: int = 60
    tier2: int = 10
    #: ignored (recipes that set it still load): a task's pass-to-pass is the project's whole
    #: stable suite (it was capped at this many tests)
    p2p_max: int = 10
    #: tasks kept per set of fail-to-pass tests (more would be near copies of one task)
    max_per_failing_set: int = 3
    releases: tuple[Mapping[str, str], ...] = ()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProjectPin:
        known = set(cls.__dataclass_fields__)
        unknown = set(data) - known
        if unknown:
            raise RecipeError(f"project {data.get('name')!r}: unknown keys {sorted(unknown)}; "
                              f"known: {sorted(known)}")
        for key in ("name", "version", "sha256"):
            if not isinstance(data.get(key), str) or not data[key]:
                raise RecipeError(f"project {data.get('name')!r}: {key!r} must be a non-empty string")
        if len(data["sha256"]) != 64:
            raise RecipeError(f"project {data['name']!r}: sha256 must be 64 hex digits")
        values = dict(data)
        for key in ("tests", "source", "python_path", "requirements", "lock", "deselect"):
            if key in values:
                values[key] = tuple(values[key])
        releases = []
        for entry in values.get("releases") or ():
            if (not isinstance(entry, Mapping) or not isinstance(entry.get("version"), str)
                    or not isinstance(entry.get("sha256"), str) or len(entry["sha256"]) != 64
                    or set(entry) - {"version", "sha256", "url", *RELEASE_LAYOUT}
                    or any(not isinstance(entry[k], list) or not all(isinstance(v, str) for v in entry[k])
                           for k in RELEASE_LAYOUT if k in entry)):
                raise RecipeError(f"project {data['name']!r}: a release is "
                                  '{"version": ..., "sha256": <64 hex digits>, "url": ...} and '
                                  f"optionally its own {list(RELEASE_LAYOUT)} (lists of paths), "
                                  f"not {entry!r}")
            releases.append(dict(entry))
        values["releases"] = tuple(releases)
        pin = cls(**values)
        if pin.split not in SPLITS:
            raise RecipeError(f"project {pin.name!r}: split must be one of {SPLITS}, not {pin.split!r}")
        if not pin.source:
            raise RecipeError(f"project {pin.name!r}: name the source paths to inject bugs into")
        return pin

    def to_dict(self) -> dict[str, Any]:
        out = {k: list(v) if isinstance(v, tuple) else v for k, v in plain_fields(self).items()}
        if not self.releases:  # recipes written before the field existed stay byte-identical
            del out["releases"]
        return out

    def at(self, version: str) -> ProjectPin:
        """This project pinned at ``version``: itself, or one of its :attr:`releases` (same
        layout, image and seed)."""
        if version == self.version:
            return self
        for entry in self.releases:
            if entry["version"] == version:
                return replace(self, version=version, sha256=entry["sha256"],
                               url=entry.get("url"), releases=(),
                               **{k: tuple(entry[k]) for k in RELEASE_LAYOUT if k in entry})
        raise RecipeError(f"project {self.name!r} pins no release {version!r}: it pins "
                          f"{[self.version] + [e['version'] for e in self.releases]}")

    def with_release(self, version: str, sha256: str, url: str | None = None,
                     layout: Mapping[str, Sequence[str]] | None = None) -> ProjectPin:
        """This pin with release ``version`` among its :attr:`releases` (replacing its entry);
        ``layout`` gives that release's own ``tests``, ``source`` or ``python_path``."""
        if version == self.version:
            return self
        entry = {"version": version, "sha256": sha256, **({"url": url} if url else {}),
                 **{k: list(layout[k]) for k in RELEASE_LAYOUT if layout and k in layout}}
        kept = tuple(e for e in self.releases if e["version"] != version)
        return replace(self, releases=(*kept, entry))

    @property
    def key(self) -> str:
        return f"{self.name}-{self.version}"

    @property
    def modules(self) -> tuple[str, ...]:
        """The top-level modules of the source paths: the first component under the
        ``python_path`` directory that holds them (``src/attr`` with ``src`` on the path:
        ``attr``; ``six.py``: ``six``)."""
        return tuple(self.module_roots)

    @property
    def module_roots(self) -> dict[str, str]:
        """Each of :attr:`modules` -> the directory of the checkout holding it (``.``: the top)."""
        out: dict[str, str] = {}
        for path in self.source:
            parts, root = path.strip("/").split("/"), "."
            for entry in sorted(self.python_path, key=len, reverse=True):
                head = entry.strip("/").split("/")
                if parts[:len(head)] == head and len(parts) > len(head):
                    parts, root = parts[len(head):], "/".join(head)
                    break
            out.setdefault(parts[0][:-3] if parts[0].endswith(".py") else parts[0], root)
        return out


@dataclass(frozen=True)
class Recipe:
    projects: tuple[ProjectPin, ...]
    path: Path | None = field(default=None, compare=False)

    @classmethod
    def load(cls, path: str | Path) -> Recipe:
        path = Path(path)
        try:
            data = orjson.loads(path.read_bytes())
        except (OSError, orjson.JSONDecodeError) as exc:
            raise RecipeError(f"{path}: cannot read the recipe ({exc})") from exc
        if not isinstance(data, dict) or data.get("version") != RECIPE_VERSION:
            raise RecipeError(f"{path}: not a version-{RECIPE_VERSION} recipe "
                              "({'version': 1, 'projects': [...]})")
        return cls.of(data.get("projects") or [], path=path)

    @classmethod
    def of(cls, projects: Sequence[Mapping[str, Any] | ProjectPin], path: Path | None = None) -> Recipe:
        pins = tuple(p if isinstance(p, ProjectPin) else ProjectPin.from_dict(p) for p in projects)
        names = [p.name for p in pins]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise RecipeError(f"projects named more than once: {twice}")
        return cls(pins, path)

    def project(self, name: str) -> ProjectPin:
        for pin in self.projects:
            if pin.name == name:
                return pin
        raise RecipeError(f"no project {name!r} in the recipe; it has "
                          f"{sorted(p.name for p in self.projects)}")

    def pin_of(self, record: Any) -> ProjectPin:
        """The pin a task record was made from: its project at its version (a release-history
        task of an earlier pair is of an earlier release, see :meth:`ProjectPin.at`)."""
        return self.project(record.project).at(record.version)

    def with_project(self, pin: ProjectPin) -> Recipe:
        """This recipe with ``pin`` in place of the project of its name, or added at the end when
        the recipe has no project of that name."""
        if all(p.name != pin.name for p in self.projects):
            return Recipe((*self.projects, pin), self.path)
        return Recipe(tuple(pin if p.name == pin.name else p for p in self.projects), self.path)

    def to_json(self) -> bytes:
        return orjson.dumps({"version": RECIPE_VERSION,
                             "projects": [p.to_dict() for p in self.projects]},
                            option=orjson.OPT_INDENT_2) + b"\n"

    def digest(self) -> str:
        return hashlib.sha256(self.to_json()).hexdigest()[:16]
