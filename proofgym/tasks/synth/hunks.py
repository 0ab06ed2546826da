"""The hunks of a release's source change, and delta debugging over them (ddmin, Zeller 2002).

A release ``b`` differs from the release before it, ``a``, by a set of hunks per file (one per
run of changed lines, no context). Any subset of them can be reverted from ``b``'s file (the
hunks are disjoint line ranges of ``b``), so "``b`` with these hunks reverted" is a well-defined
tree for every subset: :func:`ddmin` searches that space for the smallest subset whose reversion
still shows a bug.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from proofgym.core.errors import PatchError

T = TypeVar("T")


@dataclass(frozen=True, order=True)
class Hunk:
    """One run of changed lines of ``path``: ``b``'s lines ``[new_start, new_end)`` (0-based) were
    ``a``'s lines ``old`` (``new`` are ``b``'s)."""

    path: str
    new_start: int
    new_end: int
    old: tuple[str, ...]
    new: tuple[str, ...]

    @property
    def line(self) -> int:
        """The hunk's first line in ``b`` (1-based)."""
        return self.new_start + 1


def split_hunks(path: str, old: bytes, new: bytes) -> list[Hunk]:
    """The hunks turning ``old`` into ``new`` (each maximal run of changed lines, no context),
    in file order."""
    a = old.decode("utf-8").splitlines(keepends=True)
    b = new.decode("utf-8").splitlines(keepends=True)
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return [Hunk(path, j1, j2, tuple(a[i1:i2]), tuple(b[j1:j2]))
            for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]


def revert(files: Mapping[str, bytes], hunks: Iterable[Hunk]) -> dict[str, bytes]:
    """The files of ``b`` (``files``) that ``hunks`` touch, with those hunks reverted."""
    by_path: dict[str, list[Hunk]] = {}
    for hunk in hunks:
        by_path.setdefault(hunk.path, []).append(hunk)
    out = {}
    for path, mine in by_path.items():
        lines = files[path].decode("utf-8").splitlines(keepends=True)
        for hunk in sorted(mine, reverse=True):  # from the end: earlier ranges keep their lines
            if tuple(lines[hunk.new_start:hunk.new_end]) != hunk.new:
                raise PatchError(f"{path}: hunk at line {hunk.line} does not match the file")
            lines[hunk.new_start:hunk.new_end] = hunk.old
        out[path] = "".join(lines).encode("utf-8")
    return out


def _split(items: Sequence[T], n: int) -> list[list[T]]:
    size, extra = divmod(len(items), n)
    out, at = [], 0
    for i in range(n):
        step = size + (1 if i < extra else 0)
        out.append(list(items[at:at + step]))
        at += step
    return [c for c in out if c]


def ddmin(items: Sequence[T], test: Callable[[list[list[T]]], list[bool]]) -> list[T] | None:
    """A 1-minimal subset of ``items`` for which ``test`` holds (removing any one element
    breaks it), by Zeller's ddmin; ``None`` when ``test`` does not hold for ``items`` itself.

    ``test`` judges a batch of subsets at once (one sandbox run for many trees); each round asks
    for its subsets first and only then, if none holds, their complements. Each subset is
    asked about at most once (answers are remembered).
    """
    known: dict[frozenset[int], bool] = {}
    position = {id(x): i for i, x in enumerate(items)}

    def ask(configs: list[list[T]]) -> list[bool]:
        keys = [frozenset(position[id(x)] for x in c) for c in configs]
        todo = [c for c, k in zip(configs, keys, strict=True) if k not in known]
        fresh = [k for k in keys if k not in known]
        if todo:
            unique = dict(zip(fresh, todo, strict=True))
            for key, answer in zip(unique, test(list(unique.values())), strict=True):
                known[key] = bool(answer)
        return [known[k] for k in keys]

    current = list(items)
    if not current or not ask([current])[0]:
        return None
    n = 2
    while len(current) >= 2:
        chunks = _split(current, n)
        hit = next((c for c, ok in zip(chunks, ask(chunks), strict=True) if ok), None)
        if hit is not None:
            current, n = hit, 2
            continue
        rests = [[x for x in current if all(x is not y for y in c)] for c in chunks]
        if len(chunks) > 2:
            hit = next((r for r, ok in zip(rests, ask(rests), strict=True) if ok), None)
            if hit is not None:
                current, n = hit, max(n - 1, 2)
                continue
        if n >= len(current):
            break
        n = min(len(current), 2 * n)
    return current
