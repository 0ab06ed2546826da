"""The artifact's digest: computed once per artifact, equal for equal artifacts."""

from __future__ import annotations

import pickle

import pytest

from proofgym.runtimes.artifact import Artifact

pytestmark = pytest.mark.pure


class _Counted(Artifact):
    """An artifact that counts its serialisations."""

    def to_dict(self) -> dict:
        self.__dict__["serialised"] = self.__dict__.get("serialised", 0) + 1
        return super().to_dict()


def test_the_digest_is_computed_once():
    art = _Counted("sandbox", files={"a.py": b"x = 1\n", "gone.py": None}, meta={"n": 1})
    first = art.digest
    assert art.digest == first and art.digest == first
    assert art.__dict__["serialised"] == 1


def test_equal_artifacts_have_equal_digests_also_after_a_round_trip():
    art = Artifact("sandbox", state={"k": [1, 2]}, files={"a.py": b"x = 1\n"})
    digest = art.digest
    for again in (pickle.loads(pickle.dumps(art)), Artifact.from_dict(art.to_dict()),
                  Artifact("sandbox", state={"k": [1, 2]}, files={"a.py": b"x = 1\n"})):
        assert again == art and again.digest == digest
    assert Artifact("sandbox", files={"a.py": b"x = 2\n"}).digest != digest
