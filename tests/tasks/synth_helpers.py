"""A tiny pure-Python project packed as an sdist in the test (no network): what synthesis runs on."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

from proofgym.tasks.synth import ProjectPin

MODULE = '''\
def clamp(x, lo, hi):
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x


def chunks(items, size):
    out = []
    for i in range(0, len(items), size):
        out.append(items[i:i + size])
    return out


def title_words(text):
    return " ".join(w[:1].upper() + w[1:] for w in text.split() if w)


def mean(values):
    if not values:
        raise ValueError("mean of no values")
    return sum(values) / len(values)
'''

TESTS = '''\
import pytest

from pgdemo import chunks, clamp, mean, title_words


def test_clamp_below():
    assert clamp(-5, 0, 10) == 0


def test_clamp_above():
    assert clamp(50, 0, 10) == 10


def test_clamp_inside():
    assert clamp(7, 0, 10) == 7


def test_chunks_even():
    assert chunks([1, 2, 3, 4], 2) == [[1, 2], [3, 4]]


def test_chunks_rest():
    assert chunks([1, 2, 3], 2) == [[1, 2], [3]]


def test_title_words():
    assert title_words("hello big world") == "Hello Big World"


def test_mean():
    assert mean([1, 2, 3, 6]) == 3


def test_mean_empty():
    with pytest.raises(ValueError):
        mean([])
'''


def build_sdist(where: Path, name: str = "pgdemo", version: str = "0.1",
                tests: str = TESTS) -> tuple[Path, str]:
    """Write ``name-version.tar.gz`` (the module and its ``tests``) under ``where``; its path
    and sha256."""
    top = f"{name}-{version}"
    files = {f"{top}/PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{top}/{name}/__init__.py": MODULE, f"{top}/tests/test_{name}.py": tests}
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.PAX_FORMAT) as tf:
        for path, text in sorted(files.items()):
            data = text.encode()
            info = tarfile.TarInfo(path)
            info.size, info.mtime, info.mode = len(data), 1_700_000_000, 0o644
            tf.addfile(info, io.BytesIO(data))
    where.mkdir(parents=True, exist_ok=True)
    sdist = where / f"{top}.tar.gz"
    sdist.write_bytes(buf.getvalue())
    return sdist, hashlib.sha256(buf.getvalue()).hexdigest()


def demo_pin(where: Path, tests: str = TESTS, **overrides: object) -> ProjectPin:
    sdist, sha = build_sdist(where, tests=tests)
    values: dict = {"name": "pgdemo", "version": "0.1", "sha256": sha, "url": sdist.as_uri(),
                    "tests": ["tests"], "source": ["pgdemo"], "max_candidates": 40,
                    "max_tasks": 3, "tier2": 1, **overrides}
    return ProjectPin.from_dict(values)
