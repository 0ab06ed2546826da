"""``proofgym tasks pin`` and ``proofgym tasks fetch`` against a real HTTP package index on
loopback (PyPI's JSON API and file URLs), serving the fixture sdists."""

from __future__ import annotations

import hashlib
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from proofgym.cli.main import app
from proofgym.tasks.synth import Recipe
from proofgym.tasks.synth.fetch import FetchError
from proofgym.tasks.synth.pin import detect_layout, fetch_pins, pin_project
from tests.package_index import PackageIndex, serving

pytestmark = pytest.mark.pure
FIXTURES = Path(__file__).resolve().parents[1] / "envs" / "fixtures" / "sdists"
BUNDLED = Path(__file__).resolve().parents[2] / "proofgym/envs/repo_repair/data/recipe.json"


@pytest.fixture
def index(tmp_path, monkeypatch):
    sdists = {p.name[65:]: p.read_bytes() for p in FIXTURES.glob("*.tar.gz")}
    with serving(PackageIndex.of_sdists(sdists), tmp_path / "cache", monkeypatch) as served:
        yield served


def test_pin_prints_the_entry_with_the_sha256_and_the_layout_and_writes_it_into_a_recipe(index, tmp_path):
    recipe = tmp_path / "recipe.json"
    result = CliRunner().invoke(app, ["tasks", "pin", "inflection==0.5.1", "--recipe", str(recipe)])
    assert result.exit_code == 0, result.output
    entry = orjson.loads(result.output[:result.output.rindex("}") + 1])
    sdist = index.files["inflection-0.5.1.tar.gz"]
    assert entry["sha256"] == hashlib.sha256(sdist).hexdigest()
    layout = (entry["tests"], entry["source"], entry["python_path"])
    assert layout == (["test_inflection.py"], ["inflection"], [])
    pin = Recipe.load(recipe).project("inflection")  # a loadable recipe, the same entry
    assert pin.sha256 == entry["sha256"] and pin.url.endswith("/files/inflection-0.5.1.tar.gz")
    # pinned the same way as the bundled recipe's hand-written entry
    bundled = Recipe.load(BUNDLED).project("inflection")
    assert (pin.tests, pin.source) == (bundled.tests, bundled.source)


def test_pin_says_what_is_wrong_with_a_bad_requirement_or_version(index):
    bad = CliRunner().invoke(app, ["tasks", "pin", "inflection"])
    assert bad.exit_code == 2 and "NAME==VERSION" in bad.output
    with pytest.raises(FetchError, match=r"no version 9\.9"):
        pin_project("inflection", "9.9")


def test_layout_of_a_src_package_with_its_tests_beside_it(tmp_path):
    top = tmp_path / "proj-1.0"
    files = ("src/proj/__init__.py", "src/proj/core.py", "tests/test_core.py", "setup.py", "docs/conf.py")
    for path in files:
        (top / path).parent.mkdir(parents=True, exist_ok=True)
        (top / path).write_text("x = 1\n")
    assert detect_layout(top) == {"tests": ["tests"], "source": ["src/proj"], "python_path": ["src"]}
    (top / "tests" / "test_core.py").unlink()
    with pytest.raises(FetchError, match="no tests"):
        detect_layout(top)


def test_fetch_downloads_several_sdists_at_once_and_verifies_each(index, tmp_path):
    pins = [p for p in Recipe.load(BUNDLED).projects if f"{p.name}-{p.version}.tar.gz" in index.files]
    assert len(pins) >= 3
    pins = [p if p.url is None else type(p)(**{**p.__dict__, "url": None}) for p in pins]  # ask the index
    index.barrier = True
    got = fetch_pins(pins, jobs=4)
    assert index.most >= 2, "the downloads ran one at a time"
    for pin in pins:
        assert isinstance(got[pin.name], Path)
        assert hashlib.sha256(got[pin.name].read_bytes()).hexdigest() == pin.sha256
    # a pin whose hash is wrong fails alone, with the reason; the others still arrive from the cache
    wrong = type(pins[0])(**{**pins[0].__dict__, "sha256": "0" * 64})
    again = fetch_pins([wrong, *pins[1:]], jobs=4)
    assert isinstance(again[wrong.name], FetchError) and "differs from the pinned" in str(again[wrong.name])
    assert all(isinstance(again[p.name], Path) for p in pins[1:])


def test_a_task_sets_prefetch_fetches_the_missing_sdists_together_and_a_cached_one_asks_nothing(index):
    import pickle

    from proofgym.tasks.synth.pin import SdistPrefetch

    pins = [type(p)(**{**p.__dict__, "url": None}) for p in Recipe.load(BUNDLED).projects
            if f"{p.name}-{p.version}.tar.gz" in index.files]  # url None: asked of this index
    index.barrier = True
    prefetch = SdistPrefetch(pins, jobs=2)
    prefetch.wait(pins[-1])  # the first one needed: every missing one starts, that one first
    assert index.most >= 2, "the set's sdists were not fetched together"
    # its episode waits for it: it is among the first two (jobs) asked of the index (the others start
    # as a worker finishes one), not behind the rest of the set
    assert len(pins) > 2
    asked = [p for p in index.paths if p.startswith("/pypi/")]
    assert f"/pypi/{pins[-1].name}/json" in asked[:2], asked
    for pin in pins:
        prefetch.wait(pin)
    served = index.requests
    SdistPrefetch(pins).wait(pins[1])  # all cached now: nothing asked of the index
    assert index.requests == served
    copy = pickle.loads(pickle.dumps(prefetch))  # a task pickled to a grader carries only its pins
    assert copy.pins == prefetch.pins
