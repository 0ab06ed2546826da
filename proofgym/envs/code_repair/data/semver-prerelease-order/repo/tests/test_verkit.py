import pytest

from verkit import InvalidVersion, Version, latest, satisfies, sort_versions


def test_parse_and_str_round_trip():
    assert str(Version.parse("1.2.3-beta.1+exp.sha.5114f85")) == "1.2.3-beta.1+exp.sha.5114f85"


def test_invalid_version():
    with pytest.raises(InvalidVersion):
        Version.parse("1.2")


def test_numeric_fields_compare_as_numbers():
    assert sort_versions(["1.10.0", "1.2.0", "1.9.1"]) == ["1.2.0", "1.9.1", "1.10.0"]


def test_release_beats_its_prerelease():
    assert Version.parse("2.0.0-rc.1") < Version.parse("2.0.0")


def test_build_metadata_is_ignored():
    assert Version.parse("1.0.0+build.1") == Version.parse("1.0.0+build.2")


def test_latest_skips_prereleases_by_default():
    assert latest(["1.0.0", "1.1.0-beta.1"]) == "1.0.0"
    assert latest(["1.0.0", "1.1.0-beta.1"], include_prereleases=True) == "1.1.0-beta.1"


def test_satisfies():
    assert satisfies("1.4.2", ">=1.4.0, <2.0.0")
    assert not satisfies("2.0.0", ">=1.4.0, <2.0.0")


def test_release_candidates_sort_numerically():
    assert sort_versions(["1.0.0-rc.10", "1.0.0-rc.9"]) == ["1.0.0-rc.9", "1.0.0-rc.10"]
