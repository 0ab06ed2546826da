"""Tells: how often a ``grep`` for an operator's own signature finds a task's bug.

A policy that learns to search for the text a bug operator leaves (``not (``, ``(2) + 1``, a
comment over a deleted line) learns to hunt operators, not to debug. For each operator,
:data:`SIGNATURES` is a regular expression for that text; for an operator whose edit is an
ordinary token (``<`` -> ``>=``) the signature is the token itself, which occurs all over a
project, so it finds little.

A task is a **tell** for one of its operators when grepping the project's source files (the
buggy tree: the pristine sdist with the task's patch applied; test files excluded) for that
operator's signature gives between 1 and :data:`MAX_HITS` hits and one of them is on a line the
patch changed. The tell rate of a set of tasks is the share of tasks that are a tell for some
operator; per operator, the share of the tasks using it that are a tell for it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from proofgym.tasks.synth.manifest import TaskRecord
from proofgym.tasks.synth.patch import apply_patch

#: At most this many hits and the bug among them: a grep finds it.
MAX_HITS = 3

_COMPARISON = r"==|!=|<=|>=|<|>|\bis\b|\bin\b|\bnot\b"
# a comment line not followed by code at its own indentation: what a deleted line leaves under it
_ORPHAN_COMMENT = r"^([ \t]+)#[^\n]*\n(?!\1\S)"

#: Per operator, the text its edits leave (see the module docstring).
SIGNATURES: dict[str, re.Pattern[str]] = {name: re.compile(pattern, re.M) for name, pattern in {
    "flip_compare": _COMPARISON,
    "negate_condition": _COMPARISON,
    "flip_boolean": r"\b(?:and|or)\b",
    "off_by_one_constant": r"(?<![\w.])\d+(?![\w.])",
    # a parenthesised name or literal with arithmetic after it: "[:(2) + 1]"
    "off_by_one_slice": r"(?<![\w\])])\(\s*-?[\w.]+\s*\)\s*[+-]\s*\d+",
    "invert_condition": r"\bnot \(",
    "drop_condition": _ORPHAN_COMMENT,
    "drop_statement": _ORPHAN_COMMENT,
    "drop_loop": _ORPHAN_COMMENT,
    # a class or a string where isinstance/getattr take an object first: "isinstance(Pong, event)"
    "swap_arguments": r"\b(?:isinstance|issubclass|hasattr|getattr|setattr|delattr)\(\s*"
                      r"(?:[A-Z]\w*\s*,|[\"'])",
    "change_return": r"^[ \t]*return None\b",
}.items()}

_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@")


def changed_lines(patch: str) -> dict[str, set[int]]:
    """Per file, the lines of the patched file a patch touches (1-based): every added line, and
    where lines were only removed, the lines on either side of the gap."""
    out: dict[str, set[int]] = {}
    path = ""
    new = 0
    for line in patch.splitlines():
        if line.startswith("+++ b/"):
            path = line[6:]
            continue
        if line.startswith("--- "):
            continue
        m = _HUNK.match(line)
        if m:
            new = int(m.group(1))
            continue
        kind = line[:1]
        if kind == "+":
            out.setdefault(path, set()).add(new)
            new += 1
        elif kind == "-":
            out.setdefault(path, set()).update({new - 1, new})
        elif kind == " ":
            new += 1
    return out


def _hits(pattern: re.Pattern[str], text: str) -> list[tuple[int, int]]:
    """(first, last) line of every match."""
    out = []
    for m in pattern.finditer(text):
        first = text.count("\n", 0, m.start()) + 1
        last = first + text.count("\n", m.start(), max(m.start(), m.end() - 1))
        out.append((first, last))
    return out


@dataclass(frozen=True)
class ProjectSource:
    """A project's pristine source files (path -> text), grepped once per signature."""

    files: Mapping[str, bytes]

    @classmethod
    def read(cls, top: Path, paths: Iterable[str]) -> ProjectSource:
        return cls({p: (top / p).read_bytes() for p in paths})

    def __post_init__(self) -> None:
        object.__setattr__(self, "_cache", {})

    def pristine_hits(self, operator: str) -> dict[str, list[tuple[int, int]]]:
        cache: dict[str, dict[str, list[tuple[int, int]]]] = self._cache  # type: ignore[attr-defined]
        if operator not in cache:
            pattern = SIGNATURES[operator]
            cache[operator] = {p: _hits(pattern, d.decode("utf-8", "replace"))
                               for p, d in self.files.items()}
        return cache[operator]


def tells_of(record: TaskRecord, source: ProjectSource) -> list[str]:
    """The operators of ``record`` whose bug a grep for their signature finds (see the module
    docstring); ``source`` is the project's pristine source, the patch is applied here."""
    operators = [op for op in dict.fromkeys(record.operators) if op in SIGNATURES]
    if not operators:  # no signature to grep (a real fix reverted): nothing to apply either, so
        return []      # a task of an earlier release (another source than the pin's) counts too
    touched = changed_lines(record.patch)
    buggy = apply_patch({p: source.files[p] for p in touched if p in source.files}, record.patch) \
        if any(p in source.files for p in touched) else {}
    found = []
    for operator in operators:
        hits = dict(source.pristine_hits(operator))
        for path, data in buggy.items():
            hits[path] = _hits(SIGNATURES[operator], data.decode("utf-8", "replace"))
        total = sum(len(h) for h in hits.values())
        if not 1 <= total <= MAX_HITS:
            continue
        if any(first <= n <= last for path, lines in touched.items()
               for first, last in hits.get(path, ()) for n in lines):
            found.append(operator)
    return found


def tell_rates(records: Sequence[TaskRecord],
               source_of: Callable[[str], ProjectSource]) -> dict[str, Any]:
    """``{"tasks", "tells", "rate", "operators": {op: {"tasks", "tells", "rate"}}, "ids"}`` over
    ``records``; ``source_of(project)`` gives a project's pristine source."""
    per_op: dict[str, list[int]] = {}
    ids = []
    sources: dict[str, ProjectSource] = {}
    for record in records:
        if record.project not in sources:
            sources[record.project] = source_of(record.project)
        found = tells_of(record, sources[record.project])
        if found:
            ids.append(record.id)
        for op in dict.fromkeys(record.operators):
            counts = per_op.setdefault(op, [0, 0])
            counts[0] += 1
            counts[1] += op in found
    return {"tasks": len(records), "tells": len(ids),
            "rate": round(len(ids) / len(records), 4) if records else 0.0,
            "operators": {op: {"tasks": n, "tells": t, "rate": round(t / n, 4)}
                          for op, (n, t) in sorted(per_op.items())},
            "ids": ids}


def project_source(pin: Any, *, quiet: bool = True) -> ProjectSource:
    """The pristine source files of ``pin`` (a :class:`~proofgym.tasks.synth.ProjectPin`; its
    sdist is fetched into the cache on first use)."""
    from proofgym.tasks.synth.discover import source_files
    from proofgym.tasks.synth.manifest import pristine_tree

    top = pristine_tree(pin, quiet=quiet)
    return ProjectSource.read(top, source_files(top, pin.source, pin.tests))


_NAME_IN_MESSAGE = re.compile(r"'([A-Za-z_]\w*)'")
_IDENT = re.compile(r"\b[A-Za-z_]\w*\b")


def removed_names(patch: str) -> set[str]:
    """Identifiers on the patch's removed lines that no added line has."""
    removed, added = set(), set()
    for line in patch.splitlines():
        if line.startswith(("---", "+++")):
            continue
        if line.startswith("-"):
            removed.update(_IDENT.findall(line[1:].split("#", 1)[0]))
        elif line.startswith("+"):
            added.update(_IDENT.findall(line[1:]))
    return removed - added


def names_a_removed_name(patch: str, failures: Iterable[Any]) -> bool:
    """Whether a failure (``exception``, ``message``) is a ``NameError`` or
    ``UnboundLocalError`` naming an identifier the patch removed."""
    gone = removed_names(patch)
    for failure in failures:
        if failure.exception in ("NameError", "UnboundLocalError") and \
                set(_NAME_IN_MESSAGE.findall(failure.message or "")) & gone:
            return True
    return False
