# PROOFGYM-CANARY semver-prerelease-order 7f3c9b2e
import random

from verkit import Version, latest, satisfies, sort_versions

SPEC_ORDER = [
    "1.0.0-alpha",
    "1.0.0-alpha.1",
    "1.0.0-alpha.beta",
    "1.0.0-beta",
    "1.0.0-beta.2",
    "1.0.0-beta.11",
    "1.0.0-rc.1",
    "1.0.0",
]


def test_semver_spec_example_order():
    shuffled = SPEC_ORDER[:]
    random.Random(7).shuffle(shuffled)
    assert sort_versions(shuffled) == SPEC_ORDER


def test_numeric_identifier_is_lower_than_alphanumeric():
    assert Version.parse("1.0.0-alpha.1") < Version.parse("1.0.0-alpha.beta")
    assert Version.parse("1.0.0-2") < Version.parse("1.0.0-a")


def test_latest_prerelease_uses_numeric_order():
    versions = ["3.1.0-beta.2", "3.1.0-beta.10", "3.1.0-beta.9"]
    assert latest(versions, include_prereleases=True) == "3.1.0-beta.10"


def test_constraint_with_numeric_prerelease():
    assert satisfies("1.0.0-rc.10", ">1.0.0-rc.9")
    assert not satisfies("1.0.0-rc.10", "<1.0.0-rc.2")


def test_longer_prerelease_wins_when_prefix_equal():
    assert Version.parse("1.0.0-alpha") < Version.parse("1.0.0-alpha.0")
    assert Version.parse("1.0.0-alpha.beta") < Version.parse("1.0.0-alpha.beta.1")


def test_hyphenated_identifiers_compare_as_text():
    assert sort_versions(["1.0.0-x-b", "1.0.0-x-a", "1.0.0-10"]) == ["1.0.0-10", "1.0.0-x-a", "1.0.0-x-b"]


def test_equal_prereleases_hash_alike():
    assert len({Version.parse("1.0.0-rc.1+a"), Version.parse("1.0.0-rc.1+b")}) == 1
