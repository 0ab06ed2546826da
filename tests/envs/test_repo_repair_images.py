"""Issue 33, acceptance 5: no bundled RepoRepair task's image holds the project's own source, and
the control that copies what the image holds for the project's modules over the workspace scores
0 on CodeRepair and RepoRepair.

What each image installs is computed, not built: the default system's staged files, and for a
locked image the files of its pinned wheels (fetched into the test's cache with
``pip download --require-hashes``, as the builder fetches them; PyPI must be reachable under CI).
"""

from __future__ import annotations

import hashlib
import random
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from proofgym.envs.code_repair import code_repair_tasks
from proofgym.envs.code_repair import make_env as code_repair_env
from proofgym.envs.repo_repair import MANIFEST, RECIPE, make_env
from proofgym.rollout import ControlPolicy, run_episode
from proofgym.runtimes.sandbox import (
    ImageError,
    MinimalSystem,
    PackagesImage,
    WheelLock,
    cache_root,
    default_system_modules,
)
from proofgym.tasks import TaskSet
from proofgym.tasks.synth import Recipe, read_manifest
from proofgym.tasks.synth.images import check_project_image, project_image
from proofgym.tasks.synth.manifest import pristine_tree
from tests.conftest import IN_CI, require_tool
from tests.envs.repo_repair_helpers import fixture_projects, offline_cache, seed_cache, task_of


def _bundled_pins():
    recipe = Recipe.load(RECIPE)
    return [recipe.project(name) for name in sorted({r.project for r in read_manifest(MANIFEST)})]


def _locked(pin) -> PackagesImage:
    image = PackagesImage(WheelLock.parse("\n".join(pin.lock) + "\n"))
    if len(image.wheel_modules()) < len(image.lock.pins):
        _fetch(image)
    return image


def _fetch(image: PackagesImage) -> None:
    """The image's wheels (``pip download --require-hashes``); off CI, no PyPI is a skip."""
    try:
        image.fetch()
    except ImageError as exc:
        if IN_CI:
            raise
        pytest.skip(f"PyPI is not reachable here: {exc}")


def _wheel_files(image: PackagesImage) -> dict[str, str]:
    """sha256 -> 'wheel:member' of every file of the image's wheels."""
    wheels = {p.name: p for p in (cache_root() / "wheels").glob("*.whl")}
    out = {}
    for pin in image.lock.pins:
        for name, path in wheels.items():
            if name.split("-")[0].replace("_", "-").lower() == pin.name and f"-{pin.version}-" in name:
                with zipfile.ZipFile(path) as whl:
                    for member in whl.namelist():
                        out[hashlib.sha256(whl.read(member)).hexdigest()] = f"{name}:{member}"
    return out


def _fetch_every_lock(pins) -> None:
    """The wheels of every bundled lock, fetched as the builder fetches them (``fetch``: ``pip
    download --require-hashes``) but in as few pip runs as the locks allow (a run holds one
    version of a name): one run per lock started pip thirteen times, some 8 s of CPU."""
    batches: list[dict[str, str]] = []
    for pin in pins:
        for line in pin.lock:
            name = WheelLock.parse(line + "\n").pins[0].name
            batch = next((b for b in batches if b.get(name, line) == line), None)
            if batch is None:
                batches.append(batch := {})
            batch[name] = line
    for batch in batches:
        _fetch(PackagesImage(WheelLock.parse("\n".join(batch.values()) + "\n")))


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Iterator[Path]:
    """This module's cache (``PROOFGYM_CACHE``): the fixture sdists, and the wheels fetched once."""
    root = tmp_path_factory.mktemp("cache")
    seed_cache(root)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PROOFGYM_CACHE", str(root))
        _fetch_every_lock([pin for pin in _bundled_pins() if pin.requirements])
        yield root


@pytest.fixture(scope="module")
def system_files() -> dict[str, str]:
    """sha256 -> sandbox path of every file the default system stages (the base of every image)."""
    out = {}
    for dest, src in MinimalSystem.default().files:
        out[hashlib.sha256(Path(src).read_bytes()).hexdigest()] = dest
    return out


def test_no_bundled_image_installs_a_projects_module(cache):
    pins = _bundled_pins()
    assert len(pins) >= 20
    staged = set().union(*default_system_modules().values())
    assert {"pytest", "packaging", "iniconfig", "pluggy"} <= staged  # it sees the packages
    for pin in pins:
        assert pin.modules, pin.name
        check_project_image(pin)
        project_image(pin)
        if not pin.requirements:
            assert not set(pin.modules) & staged, pin.name
            continue
        image = _locked(pin)
        assert pin.name not in {p.name for p in image.lock.pins}, pin.name
        installs = image.wheel_modules()
        assert len(installs) == len(image.lock.pins), (pin.name, sorted(installs))
        for dist, modules in installs.items():
            assert not set(pin.modules) & modules, (pin.name, dist, sorted(modules))


def test_no_bundled_image_holds_a_file_of_the_projects_source(cache, system_files):
    """File by file: no file of an image (the staged system, the locked wheels' members) equals
    a non-empty ``.py`` file of the project's pinned sdist under its source paths. Offline
    projects (fixture sdists) and the locked ones (fetched) are compared."""
    offline = set(fixture_projects())
    checked = []
    for pin in _bundled_pins():
        if pin.name not in offline and not pin.requirements:
            continue
        image_files = dict(system_files)
        if pin.requirements:
            image_files.update(_wheel_files(_locked(pin)))
        top = pristine_tree(pin, quiet=True)
        sources = [p for s in pin.source for p in ([top / s] if s.endswith(".py") else
                                                     sorted((top / s).rglob("*.py")))]
        assert sources, pin.name
        for path in sources:
            data = path.read_bytes()
            if data.strip():
                found = image_files.get(hashlib.sha256(data).hexdigest())
                assert found is None, f"{pin.name}: {path.relative_to(top)} is in the image as {found}"
        checked.append(pin.name)
    assert len(checked) >= 8, checked


@pytest.mark.slow
def test_the_copy_from_image_control_scores_zero(tmp_path, monkeypatch):
    """On a sample of CodeRepair and RepoRepair tasks (``proofgym validate`` runs it on all)."""
    require_tool("bwrap")
    by_project = offline_cache(tmp_path / "cache", monkeypatch)
    rng = random.Random(33)
    sample = [task_of(rng.choice(by_project[p]), tmp_path / "cache") for p in sorted(by_project)[:2]]
    repo_env = make_env(tasks=TaskSet(sample))
    code_env = code_repair_env()
    try:
        pairs = [(repo_env, t) for t in sample] + [(code_env, t) for t in code_repair_tasks()[:2]]
        for env, task in pairs:
            traj = run_episode(env, ControlPolicy("copy_from_image"), task=task, seed=0)
            assert traj.status == "ok" and traj.reward == 0.0, (task.id, traj.reward, traj.error)
    finally:
        repo_env.close()
        code_env.close()
