"""Tasks from release history, end to end: two hand-written sdists of a tiny project served by a
real package index on loopback; release 1.1 fixes a bug (with its changelog entry), renames a
function and reworded a docstring, so delta debugging must pick the fix's hunk alone. Real
sandboxes and the real grader."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from proofgym.envs.repo_repair import check_record
from proofgym.envs.repo_repair.synth import release_layout, synthesize_history
from proofgym.tasks.synth import ProjectPin, Recipe, apply_patch, materialize, read_manifest
from proofgym.tasks.synth.changelog import best_entry, release_entries
from proofgym.tasks.synth.fetch import Release
from proofgym.tasks.synth.history import (
    HistoryError,
    behavioural,
    counterpart,
    identifiers,
    missing_name,
    orphaned_names,
    previous_release,
    release_history,
    release_pairs,
    written_statement,
)
from proofgym.tasks.synth.manifest import SYNTHETIC, StableSuite, TaskRecord, write_suites
from proofgym.tasks.synth.recipe import RecipeError
from proofgym.tasks.synth.release_names import unresolved_names
from proofgym.tasks.synth.statements import only_names_and_exceptions
from proofgym.tasks.synth.testrun import TestOutcome as Outcome
from tests.conftest import require_tool
from tests.package_index import PackageIndex, serving

MODULE_A = '''\
def clamp(x, lo, hi):
    """Clamp x to [lo, hi]."""
    if x < lo:
        return lo
    if x > hi:
        return lo
    return x


def title_words(text):
    return " ".join(w[:1].upper() + w[1:] for w in text.split() if w)


def mean(values):
    if not values:
        raise ValueError("mean of no values")
    return sum(values) / len(values)
'''

MODULE_B = '''\
def clamp(x, lo, hi):
    """Return x limited to the closed range [lo, hi]."""
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x


def titlecase(text):
    return " ".join(w[:1].upper() + w[1:] for w in text.split() if w)


def mean(values):
    if not values:
        raise ValueError("mean of no values")
    return sum(values) / len(values)
'''

TEST_NUM_A = '''\
import pytest

from pgcal import clamp, mean


def test_clamp_below():
    assert clamp(-5, 0, 10) == 0


def test_clamp_inside():
    assert clamp(7, 0, 10) == 7


def test_mean():
    assert mean([1, 2, 3, 6]) == 3


def test_mean_empty():
    with pytest.raises(ValueError):
        mean([])
'''

TEST_NUM_B = TEST_NUM_A + '''

def test_clamp_above():
    assert clamp(50, 0, 10) == 10
'''

TEST_TEXT_A = "from pgcal import title_words\n\n\ndef test_title():\n    assert title_words('a b') == 'A B'\n"
TEST_TEXT_B = ("from pgcal import titlecase\n\n\n"
               "def test_title():\n    assert titlecase('a b') == 'A B'\n\n\n"
               "def test_title_empty():\n    assert titlecase('') == ''\n")

CHANGES = '''\
Changes
=======

1.1 (2024-05-01)
----------------

- Renamed ``title_words`` to ``titlecase``.
- Fixed :func:`clamp` returning the lower bound for a value above the upper
  bound.
- Reworded docstrings.

1.0 (2024-01-01)
----------------

- First release.
'''


def _sdist(version: str, files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.PAX_FORMAT) as tf:
        for path, text in sorted({"PKG-INFO": f"Metadata-Version: 2.1\nName: pgcal\nVersion: {version}\n",
                                  **files}.items()):
            data = text.encode()
            info = tarfile.TarInfo(f"pgcal-{version}/{path}")
            info.size, info.mtime, info.mode = len(data), 1_700_000_000, 0o644
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


SDISTS = {
    "0.9": _sdist("0.9", {"pgcal/__init__.py": MODULE_A, "tests/test_num.py": TEST_NUM_A}),
    "1.0": _sdist("1.0", {"pgcal/__init__.py": MODULE_A, "tests/test_num.py": TEST_NUM_A,
                          "tests/test_text.py": TEST_TEXT_A}),
    "1.1": _sdist("1.1", {"pgcal/__init__.py": MODULE_B, "tests/test_num.py": TEST_NUM_B,
                          "tests/test_text.py": TEST_TEXT_B, "CHANGES.rst": CHANGES}),
    "1.2rc1": _sdist("1.2rc1", {"pgcal/__init__.py": MODULE_B}),
}


@pytest.fixture
def index(tmp_path, monkeypatch):
    """PyPI's JSON API and file URLs for ``SDISTS`` (1.0.post1 is listed yanked)."""
    served = PackageIndex.of_sdists({f"pgcal-{v}.tar.gz": d for v, d in SDISTS.items()})
    releases = served.releases["pgcal"]
    releases["1.0.post1"] = [{**releases["1.0"][0], "yanked": True}]
    releases["0.5"] = []  # listed, no sdist
    with serving(served, tmp_path / "cache", monkeypatch):
        yield served


def _older_release(tmp_path: Path, files: dict[str, str]) -> tuple[str, Release]:
    """Release "1.05" of pgcal, ``files`` written as its sdist, named as a pair's older release."""
    sdist = _sdist("1.05", files)
    path = tmp_path / "pgcal-1.05.tar.gz"
    path.write_bytes(sdist)
    return "1.05", Release(path.as_uri(), hashlib.sha256(sdist).hexdigest())


def _pin(version: str = "1.1") -> ProjectPin:
    return ProjectPin(name="pgcal", version=version, sha256=hashlib.sha256(SDISTS[version]).hexdigest(),
                      tests=("tests",), source=("pgcal",))


@pytest.mark.pure
def test_the_release_before_is_the_highest_earlier_one_with_an_sdist_not_yanked(index):
    version, release = previous_release("pgcal", "1.1")
    assert version == "1.0" and release.url.endswith("/files/pgcal-1.0.tar.gz")
    assert release.sha256 == hashlib.sha256(SDISTS["1.0"]).hexdigest()
    assert previous_release("pgcal", "1.2rc1")[0] == "1.1"  # a pre-release's predecessor
    with pytest.raises(HistoryError, match="no earlier sdist"):
        previous_release("pgcal", "0.9")


@pytest.mark.pure
def test_release_pairs_walk_back_consecutive_releases_until_the_index_runs_out(index):
    pairs = release_pairs("pgcal", "1.1", 5)
    assert [(b, a) for (b, _), (a, _) in pairs] == [("1.1", "1.0"), ("1.0", "0.9")]
    (_, b_release), _ = pairs[1]  # an earlier b comes with its sdist, to pin it
    assert b_release.sha256 == hashlib.sha256(SDISTS["1.0"]).hexdigest()
    assert [(b, a) for (b, _), (a, _) in release_pairs("pgcal", "1.1", 1)] == [("1.1", "1.0")]


@pytest.mark.pure
def test_a_release_laid_out_otherwise_than_the_recipe_says_gives_a_one_line_reason(index):
    # walking back, an older b may predate the recipe's layout (semver 3.0.0 -> 2.13.0 left src/)
    report = release_history(ProjectPin(**{**_pin("1.0").__dict__, "source": ("src/pgcal",)}),
                             quiet=True)
    assert report.records == [] and report.reason is not None and "\n" not in report.reason
    assert report.reason.startswith("1.0's sdist is laid out otherwise than the recipe says")


@pytest.mark.pure
def test_a_release_without_the_recipes_test_path_gives_a_one_line_reason(index):
    # walking back, an older b may not ship the tests (first 2.0.1 has no test_first.py): that
    # pair gives none, the run goes on (it stopped the whole command with a RecipeError)
    report = release_history(ProjectPin(**{**_pin().__dict__, "tests": ("test_pgcal.py",)}),
                             quiet=True)
    assert report.records == [] and report.reason is not None and "\n" not in report.reason
    assert report.reason.startswith("1.1's sdist is laid out otherwise than the recipe says")


@pytest.mark.pure
def test_an_earlier_release_laid_out_otherwise_is_pinned_with_its_own_layout(index, tmp_path):
    # walking back past a move (semver 2.13.0 had no src/, isodate 0.6.1 kept its tests in the
    # package): the pair runs on the layout read off that release's sdist, and its releases
    # entry records it, so its tasks are built with it
    newest = ProjectPin(**{**_pin().__dict__, "source": ("src/pgcal",), "python_path": ("src",)})
    moved = newest.with_release("1.0", _pin("1.0").sha256).at("1.0")
    pin, layout = release_layout(moved)
    assert layout == {"source": ["pgcal"], "python_path": []}
    assert (pin.source, pin.python_path, pin.tests, pin.version) == (("pgcal",), (), ("tests",), "1.0")
    assert release_layout(_pin("1.0")) == (_pin("1.0"), None)  # laid out as the recipe says
    pinned = newest.with_release("1.0", pin.sha256, None, layout=layout)
    recipe = tmp_path / "recipe.json"
    recipe.write_bytes(Recipe.of([pinned]).to_json())
    assert Recipe.load(recipe).project("pgcal").at("1.0") == pin
    bad = {**pinned.to_dict(), "releases": [{**pinned.releases[0], "source": "pgcal"}]}
    with pytest.raises(RecipeError, match="a release is"):
        ProjectPin.from_dict(bad)


@pytest.mark.pure
def test_a_source_file_continues_the_older_release_s_module_or_package(tmp_path):
    # inflection 0.5.1 moved inflection.py to inflection/__init__.py: the pair compares the two
    (tmp_path / "pkg").mkdir()
    for name in ("pkg/__init__.py", "mod.py", "same.py"):
        (tmp_path / name).write_text("")
    assert counterpart(tmp_path, "same.py") == "same.py"
    assert counterpart(tmp_path, "mod/__init__.py") == "mod.py"
    assert counterpart(tmp_path, "pkg.py") == "pkg/__init__.py"
    assert counterpart(tmp_path, "other/__init__.py") is None and counterpart(tmp_path, "x.py") is None
    # and across a move into src/ (hyperframe 6.0.0) or out of it
    assert counterpart(tmp_path, "src/pkg/__init__.py") == "pkg/__init__.py"
    assert counterpart(tmp_path, "src/mod/__init__.py") == "mod.py"
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "lib.py").write_text("")
    assert counterpart(tmp_path, "lib.py") == "src/lib.py"


@pytest.mark.pure
def test_a_pin_names_earlier_releases_and_a_record_finds_its_own(tmp_path):
    pin = _pin().with_release("1.0", "a" * 64, "https://example.invalid/pgcal-1.0.tar.gz")
    recipe = tmp_path / "recipe.json"
    recipe.write_bytes(Recipe.of([pin]).to_json())
    loaded = Recipe.load(recipe)
    assert loaded.project("pgcal") == pin and "releases" not in _pin().to_dict()
    older = TaskRecord("pgcal-x", "pgcal", "1.0", 1, (), 0, "", ("t::x",), (), "t", "r",
                       origin="release 0.9->1.0")
    at = loaded.pin_of(older)
    assert (at.version, at.sha256, at.key, at.tests) == ("1.0", "a" * 64, "pgcal-1.0", ("tests",))
    assert loaded.pin_of(TaskRecord(**{**older.__dict__, "version": "1.1"})) == pin
    with pytest.raises(RecipeError, match=r"pins no release '0\.9'"):
        loaded.pin_of(TaskRecord(**{**older.__dict__, "version": "0.9"}))


@pytest.mark.pure
def test_a_failure_on_a_name_the_release_lacks_is_not_behavioural():
    names = {"clamp", "title_words", "pgcal"}
    api = [Outcome("error", "ImportError", "cannot import name 'titlecase' from 'pgcal'"),
           Outcome("failed", "AttributeError", "module 'pgcal' has no attribute 'titlecase'"),
           Outcome("failed", "NameError", "name 'titlecase' is not defined"),
           Outcome("failed", "TypeError", "clamp() got an unexpected keyword argument 'strict'"),
           Outcome("error", "ModuleNotFoundError", "No module named 'pgcal.text'")]
    assert [missing_name(o, names) for o in api] == ["titlecase", "titlecase", "titlecase", "strict", "text"]
    assert not any(behavioural(o, names) for o in api)
    real = [Outcome("failed", "AssertionError", "assert 0 == 10"),
            Outcome("failed", "AttributeError", "'NoneType' object has no attribute 'upper'"),
            Outcome("failed", "ImportError", "cannot import name 'clamp' (circular import)")]
    assert all(behavioural(o, names | {"upper"}) for o in real)
    assert not behavioural(Outcome("passed"), names) and not behavioural(None, names)


@pytest.mark.pure
def test_a_name_a_release_only_uses_is_not_one_it_has():
    # sqlparse 0.6.1's DOS fix defines _UNQUOTED_TEXT and uses it; reverting the definition alone
    # leaves the use: the NameError that follows is a missing name, not the old behaviour
    source = (b"import re as regex\n\n"
              b"def split(text, strict=False):\n    return _UNQUOTED_TEXT.findall(text)\n")
    names = identifiers("sqlparse/utils.py", source)
    assert {"split", "strict", "text", "regex", "re", "utils", "sqlparse"} <= names
    assert "_UNQUOTED_TEXT" not in names and "findall" not in names
    failure = Outcome("failed", "NameError", "name '_UNQUOTED_TEXT' is not defined")
    assert missing_name(failure, names) == "_UNQUOTED_TEXT"


@pytest.mark.pure
def test_a_revert_that_leaves_a_read_name_undefined_is_no_release_s_code():
    # semver 3.1.2 added `import warnings` and a warnings.warn(...) block; reverting the import
    # alone fails the test inside pytest.warns as "DID NOT WARN", not as a NameError
    b = b"import warnings\nimport os\n\ndef eq(x):\n    warnings.warn('no')\n    return len(x)\n"
    assert orphaned_names(b, b.replace(b"import warnings\n", b""), "semver/version.py") == {"warnings"}
    assert orphaned_names(b, b.replace(b"    warnings.warn('no')\n", b""), "v.py") == set()
    assert orphaned_names(b, b.replace(b"import os\n", b""), "v.py") == set()  # not read
    star = b"from os.path import *\n" + b.replace(b"import warnings\n", b"")
    assert orphaned_names(b, star, "v.py") == set()  # a star import may bring it


@pytest.mark.pure
def test_a_revert_that_leaves_a_local_or_a_parameter_read_but_unbound_is_no_release_s_code():
    # tomlkit 0.11.5 added `original = ...` to String.__add__ and passed it on in another hunk;
    # reverting the first alone left `original` read and bound nowhere in the function (another
    # function of the module binds a local of that name: a module-wide name set missed it)
    b = (b"def add(self, other):\n    result = str(self) + other\n"
         b"    original = self._original + other\n    return self._new(result, original)\n\n\n"
         b"def other(x):\n    original = x\n    return original\n")
    assert orphaned_names(b, b.replace(b"    original = self._original + other\n", b""),
                          "tomlkit/items.py") == {"original"}
    # boltons 23.1.0's pairwise_iter(src, end=_UNSET): the parameter reverted, `end` still read
    p = b"_UNSET = object()\n\n\ndef pairwise_iter(src, end=_UNSET):\n    return windowed(src, 2, end)\n"
    assert orphaned_names(p, p.replace(b", end=_UNSET", b""), "b.py") == {"end"}
    # a name read and bound nowhere in both (a module filled through globals()) is not the revert's
    g = b"globals()['late'] = 1\n\n\ndef f():\n    return late\n"
    assert orphaned_names(g, g + b"\n\ndef h():\n    return 2\n", "g.py") == set()
    # a nested function reading its enclosing function's local, a `global` it assigns, a
    # module dunder: all bound
    n = (b"def outer():\n    x = 1\n    def inner():\n        return x\n    return inner\n\n\n"
         b"def setter():\n    global CACHE\n    CACHE = {}\n\n\ndef reader():\n    return CACHE, __file__\n")
    assert unresolved_names(n, "n.py") == set()
    assert unresolved_names(b"from os import *\n\n\ndef f():\n    return path\n") is None


@pytest.mark.pure
def test_a_failure_with_nothing_to_describe_gives_a_report_the_history_gate_drops():
    """What ``ReleaseHistory._task`` refuses as ``report_says_nothing`` (tomlkit 0.14.0's
    `_render_table` and xmltodict 1.0.0's memory check gave "Expected: the behaviour it had
    before"): a bare assertion's failure; one that compares two values is described."""
    test = "tests/test_a.py::test_render"
    bare = written_statement(_pin(), {test: Outcome("failed", "AssertionError", None)},
                             [b"def test_render():\n    assert render()\n"], 3)
    assert only_names_and_exceptions(bare[1]), bare[1]
    values = written_statement(_pin(), {test: Outcome("failed", "AssertionError",
                                                      "assert '[a]' == '[a.b]'")},
                               [b"def test_render():\n    assert render() == '[a.b]'\n"], 3)
    assert not only_names_and_exceptions(values[1]), values[1]


@pytest.mark.pure
def test_the_changelog_entry_that_names_the_fixed_function_is_picked(tmp_path):
    (tmp_path / "CHANGES.rst").write_text(CHANGES)
    entries = release_entries(tmp_path, "1.1")
    assert [e.text[:12] for e in entries] == ["Renamed titl", "Fixed clamp ", "Reworded doc"]
    fix_words = {"return", "lo", "hi"}
    assert best_entry(entries, {"clamp"}, fix_words | {"clamp", "above"}) is entries[1]
    assert best_entry(entries, {"mean"}, {"empty"}) is None  # nothing matches: no statement
    assert release_entries(tmp_path, "1.2") == []
    # Markdown links read as their text; a verb's form does not matter (boltons, sqlparse 0.6.1)
    (tmp_path / "CHANGELOG.md").write_text(
        "## 2.0\n\n- Fixed [iterutils.xfrange][iterutils.xfrange] for [ranges](https://x.y)\n"
        "- Dollar signs are now escaped in the php output.\n- Something else entirely.\n")
    md = release_entries(tmp_path, "2.0")
    assert md[0].text == "Fixed iterutils.xfrange for ranges"
    assert best_entry(md, set(), {"php", "dollar", "escape", "multiline"}) is md[1]


@pytest.mark.pure
def test_a_changelog_of_one_line_per_change_at_the_end_of_the_readme_is_read(tmp_path):
    (tmp_path / "README.rst").write_text(
        "Usage\n=====\n\nparse('{}', 'x')\n\nHistory\n-------\n\n"
        "- 1.22.4 Account for the capture groups %z adds to the pattern (thanks @a)\n"
        "  Fix case-sensitive am/pm under case-insensitive matching (thanks @b)\n"
        "- 1.22.3 Something older\n")
    entries = release_entries(tmp_path, "1.22.4")
    assert [e.text for e in entries] == [
        "Account for the capture groups %z adds to the pattern",
        "Fix case-sensitive am/pm under case-insensitive matching"]
    hunk = {"matching", "case", "insensitive", "ignorecase", "normalise", "meridiem", "upper"}
    assert best_entry(entries, {"date_convert"}, hunk) is entries[1]
    # a heading with a date and prose before the bullets: the bullets are the entries
    (tmp_path / "CHANGELOG").write_text(
        "Release 1.22.5 (Nov 01, 2026)\n----------------------------\n\nEnd of Maintenance\n\n"
        "Version 1.22.5 marks the final release.\n\nBug Fixes\n\n* Fix a crash in format().\n"
        "* sqlformat no longer empties the file when formatting fails, e.g. because a statement\n"
        "  exceeds the limits. The file is now only written after formatting succeeded.\n\n"
        "Release 1.22.3 (Aug 13, 2026)\n----------------------------\n\n* Older.\n")
    assert [e.text for e in release_entries(tmp_path, "1.22.5")] == [
        "Fix a crash in format().",
        "sqlformat no longer empties the file when formatting fails, e.g. because a statement "
        "exceeds the limits. The file is now only written after formatting succeeded."]
    (tmp_path / "CHANGES.rst").write_text(CHANGES.replace("1.1 (", "1.22.4 ("))
    assert {e.file for e in release_entries(tmp_path, "1.22.4")} == {"CHANGES.rst"}  # README last
    # a Sphinx project's changelog (h11: docs/source/changes.rst)
    (tmp_path / "docs" / "source").mkdir(parents=True)
    (tmp_path / "docs" / "source" / "changes.rst").write_text(
        "v0.16.0 (2025-04-23)\n--------------------\n\n* Reject Content-Length with spaces.\n")
    assert [(e.file, e.text) for e in release_entries(tmp_path, "0.16.0")] == [
        ("docs/source/changes.rst", "Reject Content-Length with spaces.")]


def test_old_records_load_as_synthetic_and_origins_round_trip():
    old = {"id": "p-1", "project": "p", "version": "1", "tier": 1, "bugs": [], "seed": 0, "patch": "",
           "fail_to_pass": ["t::a"], "pass_to_pass": [], "title": "t", "bug_report": "r", "stats": {}}
    record = TaskRecord.from_dict(old)
    assert record.origin == SYNTHETIC == "synthetic operator" and record.provenance == {}
    assert record.to_dict()["origin"] == "synthetic operator" and "provenance" not in record.to_dict()
    real = TaskRecord(**{**record.__dict__, "origin": "release 1.0->1.1",
                         "provenance": {"statement": {"writer": "changelog"}}})
    assert TaskRecord.from_dict(json.loads(json.dumps(real.to_dict()))) == real


@pytest.mark.slow
def test_release_history_reverts_only_the_fix_and_the_grader_agrees(index, tmp_path):
    require_tool("bwrap")
    # pinned at 1.2rc1, three release pairs back: 1.1->1.2rc1 changed no source, 1.0->1.1 fixed
    # the bug, 0.9->1.0 changed no source
    recipe = tmp_path / "recipe.json"
    recipe.write_bytes(Recipe.of([_pin("1.2rc1")]).to_json())
    manifest = tmp_path / "tasks.jsonl"
    synthetic = TaskRecord("pgcal-old", "pgcal", "1.2rc1", 1, (), 0, "", ("t::x",), (), "t", "r")
    other = TaskRecord("pgcal-rel", "pgcal", "1.1", 1, (), 0, "", ("t::y",), (), "t", "r",
                       origin="release 0.1->1.1")
    manifest.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in (synthetic, other)))
    # the manifest's stable suite of 1.1 (its synthetic tasks' pass-to-pass), one test short of
    # what this run finds stable: the release's task checks the manifest's suite
    suite = ("tests/test_num.py::test_clamp_above", "tests/test_num.py::test_clamp_below",
             "tests/test_num.py::test_clamp_inside", "tests/test_num.py::test_mean",
             "tests/test_num.py::test_mean_empty", "tests/test_text.py::test_title")
    write_suites(manifest, {"pgcal": StableSuite("1.1", suite)})

    newest, report, oldest = synthesize_history(recipe, manifest, quiet=True,
                                                cache_root=tmp_path / "tasks", pairs=3)
    assert [(r.before, r.after, r.reason) for r in (newest, oldest)] == [
        ("1.1", "1.2rc1", "no source change between 1.1 and 1.2rc1"),
        ("0.9", "1.0", "no source change between 0.9 and 1.0")]
    assert report.reason is None and (report.before, report.after) == ("1.0", "1.1"), report.to_dict()
    # 1.1, which gave a task, is pinned in the recipe (its task is built from its own sdist)
    pin = Recipe.load(recipe).project("pgcal").at("1.1")
    assert (pin.version, pin.sha256) == ("1.1", _pin("1.1").sha256)
    assert pin.url is not None and pin.url.endswith("/files/pgcal-1.1.tar.gz")
    assert set(json.loads((tmp_path / "tasks.history.json").read_text())) == {
        "pgcal", "pgcal==1.1", "pgcal==1.0"}
    assert report.hunks == 3 and report.stable_tests == 6
    (record,) = report.records
    assert record.version == "1.1" and Recipe.load(recipe).pin_of(record) == pin
    # the manifest: the project's synthetic task stays, its earlier task of release 1.1 is replaced
    assert [r.id for r in read_manifest(manifest)] == ["pgcal-old", record.id]
    assert record.origin == "release 1.0->1.1"
    assert record.fail_to_pass == ("tests/test_num.py::test_clamp_above",)
    assert record.pass_to_pass == suite[1:]  # the whole rest of the manifest's stable suite
    assert b'"pass_to_pass":"stable suite"' in manifest.read_bytes().splitlines()[-1]
    # only the fix's hunk is reverted: the rename and the docstring of 1.1 stay
    assert [(b["function"], b["line"]) for b in record.bugs] == [("clamp", 6)]
    buggy = apply_patch({"pgcal/__init__.py": MODULE_B.encode()}, record.patch)["pgcal/__init__.py"]
    assert buggy == MODULE_B.replace("        return hi\n", "        return lo\n").encode()
    # the report is the project's own changelog entry, marked as such
    assert record.title.startswith("Fixed clamp returning the lower bound")
    assert "Fixed clamp returning the lower bound for a value above the upper bound." in record.bug_report
    assert record.provenance == {"statement": {"writer": "changelog", "file": "CHANGES.rst",
                                               "version": "1.1"}}
    assert record.stats["grading_s"] > 0
    # the task: the bug in the workspace, the failing test hidden, 1.1's file as the reference
    root = materialize(record, pin, root=tmp_path / "tasks")
    assert (root / "repo" / "pgcal" / "__init__.py").read_bytes() == buggy
    assert (root / "solution" / "pgcal" / "__init__.py").read_text() == MODULE_B
    assert b"test_clamp_above" not in (root / "repo" / "tests" / "test_num.py").read_bytes()
    # the real grader: the buggy tree scores 0, 1.1's code 1 (the gate, run once more here)
    assert check_record(record, pin, cache_root=tmp_path / "tasks")[:2] == (True, None)


@pytest.mark.slow
def test_a_release_whose_tests_fail_on_the_old_code_only_by_names_gives_a_one_line_reason(index, tmp_path):
    require_tool("bwrap")
    # 1.0 against 0.9: test_text.py is new and imports title_words, which 0.9 has too; nothing
    # changed in the source at all
    report = release_history(_pin("1.0"), quiet=True)
    assert report.records == [] and report.reason == "no source change between 0.9 and 1.0"
    # against an older release (named, not from the index) that differs only by the rename:
    # the tests of 1.1 that fail there fail on the name alone
    before = _older_release(tmp_path, {"pgcal/__init__.py": MODULE_B.replace("titlecase", "title_words")})
    report = release_history(_pin(), quiet=True, before=before)
    assert report.records == [] and report.candidates == 0
    assert report.reason is not None and "\n" not in report.reason
    assert report.reason.startswith("no behavioural fail-to-pass: the 2 tests of 1.1 that fail on "
                                    "1.05's source"), report.reason


@pytest.mark.slow
def test_a_fix_across_a_move_from_a_module_to_a_package_is_found(index, tmp_path):
    require_tool("bwrap")
    # release "a" kept the code in pgcal.py (with the clamp bug and the old name); 1.1 has the
    # package pgcal/: its hunks are taken against pgcal.py (the pair gave "the layout changed")
    before = _older_release(tmp_path, {"pgcal.py": MODULE_A, "tests/test_num.py": TEST_NUM_A})
    report = release_history(_pin(), quiet=True, before=before)
    (record,) = report.records
    assert record.fail_to_pass == ("tests/test_num.py::test_clamp_above",)
    assert [(b["file"], b["function"]) for b in record.bugs] == [("pgcal/__init__.py", "clamp")]


@pytest.mark.slow
def test_an_import_the_release_dropped_does_not_hide_its_fixes(index, tmp_path):
    require_tool("bwrap")
    # release "a" imported a module the sandbox lacks (isodate 0.6.1's `from six import ...`,
    # munch 3.0.0's dropped python3_compat): on a's source no test ran at all, and the pair gave
    # "no behavioural fail-to-pass". The screen keeps b's imports, so the clamp fix is found.
    old = "import pgcal_gone_compat\n" + MODULE_A
    before = _older_release(tmp_path, {"pgcal/__init__.py": old, "tests/test_num.py": TEST_NUM_A})
    report = release_history(_pin(), quiet=True, before=before)
    (record,) = report.records
    assert record.fail_to_pass == ("tests/test_num.py::test_clamp_above",)
    assert "pgcal_gone_compat" not in record.patch


@pytest.mark.slow
def test_a_module_the_release_removed_is_there_for_the_old_code(index, tmp_path):
    require_tool("bwrap")
    # release "a" used a module b removed, at import time (funcy 1.18's compat.py and py3.py,
    # gone in 2.0): without it no test ran on a's source. The screen has a's own modules too;
    # the task (b with only the clamp fix reverted) needs none of them
    old = "from pgcal._compat import lowest\n\n\n" + MODULE_A + "\n\nFLOOR = lowest(0)\n"
    before = _older_release(tmp_path, {"pgcal/__init__.py": old,
                                       "pgcal/_compat.py": "def lowest(x):\n    return x\n",
                                       "tests/test_num.py": TEST_NUM_A})
    report = release_history(_pin(), quiet=True, before=before)
    (record,) = report.records
    assert record.fail_to_pass == ("tests/test_num.py::test_clamp_above",)
    assert "_compat" not in record.patch and "FLOOR" not in record.patch


@pytest.mark.slow
def test_a_test_file_that_hangs_on_the_old_code_leaves_the_other_files_candidates(index, tmp_path,
                                                                                  monkeypatch):
    require_tool("bwrap")
    import proofgym.tasks.synth.history as history

    monkeypatch.setattr(history, "RUN_TIMEOUT_S", 4.0)  # the hang costs this, twice
    # release "a": 1.1 with the clamp bug, and a titlecase that never returns on '' (so
    # tests/test_text.py hangs as a whole; cachetools 8.0.1 looped so on iteration). It waits
    # rather than spins: the two hangs spun 8 s of CPU out of a suite that is short of it
    hanging = MODULE_B.replace("        return hi\n", "        return lo\n").replace(
        "def titlecase(text):\n",
        "def titlecase(text):\n    import time\n\n    while not text:\n        time.sleep(0.05)\n")
    before = _older_release(tmp_path, {"pgcal/__init__.py": hanging})
    report = release_history(_pin(), quiet=True, before=before)
    assert report.rejected.get("test_file_hangs_on_a") == 1, report.to_dict()
    (record,) = report.records
    assert record.fail_to_pass == ("tests/test_num.py::test_clamp_above",)
    assert [(b["function"], b["line"]) for b in record.bugs] == [("clamp", 6)]


@pytest.mark.slow
def test_a_release_whose_suite_does_not_finish_gives_a_one_line_reason(index, tmp_path, monkeypatch):
    require_tool("bwrap")
    import functools

    import proofgym.tasks.synth.history as history

    # click 8.5.1's suite waits on a terminal in the sandbox: its first run timed out and the
    # error ended `tasks history` for every project after it; now it is the pair's reason
    monkeypatch.setattr(history, "SuiteRunner", functools.partial(history.SuiteRunner, timeout_s=4.0))
    waits = _sdist("1.3", {"pgcal/__init__.py": MODULE_B, "tests/test_num.py": TEST_NUM_B,
                           "tests/test_wait.py": "def test_wait():\n    while True:\n        pass\n"})
    path = tmp_path / "pgcal-1.3.tar.gz"
    path.write_bytes(waits)
    pin = _pin().with_release("1.3", hashlib.sha256(waits).hexdigest(), path.as_uri()).at("1.3")
    before = _older_release(tmp_path, {"pgcal/__init__.py": MODULE_A, "tests/test_num.py": TEST_NUM_A})
    report = release_history(pin, quiet=True, before=before)
    assert report.records == []
    assert report.reason == "1.3's suite does not finish in the sandbox within 4 s", report.reason
