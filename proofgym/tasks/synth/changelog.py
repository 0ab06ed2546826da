"""A release's own changelog entry for a fix: sdists ship ``CHANGES``/``NEWS``/``HISTORY``/
``CHANGELOG`` files; :func:`release_entries` reads the section of one version and splits it into
entries, :func:`best_entry` picks the one that shares the most with the fix (the changed
functions' names, the words of the changed lines and of the failing tests' names), or none when
no entry matches confidently.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

_README = re.compile(r"^readme(\.(rst|md|txt|markdown))?$", re.I)
_NAMES = re.compile(r"^(changes|changelog|change_log|news|history|release[-_ ]?notes)"
                    r"(\.(rst|md|txt|markdown))?$", re.I)
_DOC_DIRS = ("docs", "doc", "docs/source", "doc/source", ".")
_UNDERLINE = re.compile(r"^\s*([=\-~^*+#`'\"])\1{2,}\s*$")
_BULLET = re.compile(r"^(\s*)([-*+•]|\d+[.)]|#\d+:?)\s+")
_VERSIONISH = re.compile(r"(?<![\w.])v?\d+(\.\d+)+([a-z]+\d*)?(?![\w])", re.I)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STOP_WORDS = """the and for with from that this into when not are was were has have had now
can could should would will been being its it's than then also only but use used uses using
return returns none true false self cls def class import raise raises pass else elif while
value values fix fixed fixes fixing bug bugs issue issues added add adds removed remove change
changed changes new old test tests make made more most some any all one two out get set"""
_STOP = frozenset(_STOP_WORDS.split())
#: an entry is taken only with at least this score and ahead of every other entry
CONFIDENT = 3


@dataclass(frozen=True)
class Entry:
    """One changelog entry (a bullet, or a paragraph where the section has no bullets)."""

    file: str  # relative to the sdist's top directory
    version: str
    text: str

    @property
    def title(self) -> str:
        first = re.split(r"(?<=[.!?])\s", self.text, maxsplit=1)[0].strip()
        return first if len(first) <= 90 else first[:87].rstrip() + "..."


def changelog_files(top: Path) -> list[Path]:
    """The changelog files of the unpacked sdist ``top`` (under ``docs``, ``doc``, a Sphinx
    project's ``docs/source``, then the top directory; the README last)."""
    out = []
    for sub in _DOC_DIRS:
        base = top / sub
        if base.is_dir():
            out += sorted(p for p in base.iterdir() if p.is_file() and _NAMES.match(p.name))
    # some projects keep their changelog at the end of the README (parse): the last resort
    out += sorted(p for p in top.iterdir() if p.is_file() and _README.match(p.name))
    return list(dict.fromkeys(out))


def _mentions(line: str, version: str) -> bool:
    return re.search(rf"(?<![\w.])v?{re.escape(version)}(?![\w]|\.\d)", line) is not None


def _heading(lines: Sequence[str], i: int) -> bool:
    line = lines[i].strip()
    if not line or len(line) > 100 or _UNDERLINE.match(line):
        return False
    underlined = i + 1 < len(lines) and _UNDERLINE.match(lines[i + 1]) is not None
    return (underlined or line.startswith("#")
            or re.match(r"^[\W_]*(v|version|release)?\s*\[?v?\d+(\.\d+)+", line, re.I) is not None)


def release_section(text: str, version: str) -> list[str] | None:
    """The lines of ``version``'s section of a changelog (``None``: no heading names the
    version). A heading that goes on after the version (``- 1.22.4 Fix the am/pm case``, a
    changelog of one line per change) starts the section with what follows it, one entry per
    line."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if _mentions(line, version) and _heading(lines, i)),
                 None)
    if start is None:
        return None
    body = start + (2 if start + 1 < len(lines) and _UNDERLINE.match(lines[start + 1]) else 1)
    end = len(lines)
    for j in range(body, len(lines)):
        if _heading(lines, j) and _VERSIONISH.search(lines[j]) and not _mentions(lines[j], version):
            end = j
            break
    rest = lines[start][_mentioned(lines[start], version):].lstrip(" -:)]*").rstrip()
    rest = re.sub(r"^\([^)]*\)|^\d{4}-\d\d-\d\d", "", rest).strip(" -:")  # a date is no change
    if len(re.findall(r"[A-Za-z]{2,}", rest)) >= 3 and not any(_BULLET.match(x) for x in lines[body:end]):
        return ["- " + rest, *("- " + line.strip() for line in lines[body:end] if line.strip())]
    return lines[body:end]


def _mentioned(line: str, version: str) -> int:
    match = re.search(rf"(?<![\w.]){re.escape(version)}(?![\w]|\.\d)", line)
    return match.end() if match else 0


def _clean(text: str) -> str:
    text = re.sub(r":[\w:]+:`~?([^`<]*?)(\s*<[^>]*>)?`", r"\1", text)  # :func:`x` -> x
    text = re.sub(r"`+([^`]*)`+_?", r"\1", text)
    text = re.sub(r"\[([^\]]+)\](\[[^\]]*\]|\([^)]*\))", r"\1", text)  # Markdown links
    text = re.sub(r"\s*\((thanks|by|via|reported by)\b[^)]*\)", "", text, flags=re.I)  # credits
    return " ".join(text.split())


def split_entries(section: Sequence[str]) -> list[str]:
    """The entries of a section: its bullets (with their continuation lines), else its paragraphs;
    sub-headings are left out."""
    bulleted = any(_BULLET.match(line) for line in section)
    entries: list[list[str]] = []
    current: list[str] | None = None
    blank = False
    for i, line in enumerate(section):
        following = section[i + 1] if i + 1 < len(section) else ""
        if _UNDERLINE.match(line) or _UNDERLINE.match(following) or line.lstrip().startswith("#"):
            current = None  # a sub-heading ("Bug fixes", "### Fixed")
            continue
        if not line.strip():
            blank = True
            if not bulleted:
                current = None
            continue
        match = _BULLET.match(line)
        if match:
            current = [line[match.end():]]
            entries.append(current)
        elif current is not None and (not blank or line[:1].isspace()):
            current.append(line)  # a continuation: right below, or indented after a blank line
        elif not bulleted:
            current = [line]
            entries.append(current)
        else:
            current = None
        blank = False
    return [t for t in (_clean(" ".join(e)) for e in entries) if t]


def release_entries(top: Path, version: str) -> list[Entry]:
    """Every entry of ``version``'s section in the changelog files of ``top`` (the README only
    when no changelog file has the section)."""
    out = []
    for path in changelog_files(top):
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        section = release_section(text, version)
        if section and not (out and _README.match(path.name)):
            rel = str(path.relative_to(top))
            out += [Entry(rel, version, t) for t in split_entries(section)]
    return out


def words(text: str) -> set[str]:
    """The lower-case words of ``text`` (identifiers split at ``_`` and camelCase), 3+ letters,
    without common English and Python words."""
    out = set()
    for ident in _WORD.findall(text):
        for part in re.split(r"_|(?<=[a-z0-9])(?=[A-Z])", ident):
            part = part.lower()
            if len(part) >= 3 and part not in _STOP and not part.isdigit():
                out.add(part)
    return out


def score(entry: Entry, names: Iterable[str], evidence: set[str]) -> int:
    """3 per changed function or class the entry names, 1 per other word it shares with the
    evidence (the changed lines, the failing tests' names)."""
    evidence = {_stem(w) for w in evidence}
    idents = {w.lower() for w in _WORD.findall(entry.text)}
    named = {n.lower() for n in names if n and n.lower() in idents and n.lower() not in _STOP}
    named_words = {w for n in named for w in words(n)}
    return 3 * len(named) + len(({_stem(w) for w in words(entry.text)} & evidence)
                                - {_stem(w) for w in named_words})


def _stem(word: str) -> str:
    """``escaped``, ``escapes``, ``escaping`` -> ``escap``: enough to match a changelog's verbs
    with the code's names."""
    for suffix in ("ing", "ed", "es", "s", "e"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[:-len(suffix)]
    return word


def best_entry(entries: Sequence[Entry], names: Iterable[str], evidence: set[str]) -> Entry | None:
    """The entry that matches the fix best, if it scores at least :data:`CONFIDENT` and more
    than every other entry; else ``None``."""
    names = list(names)
    ranked = sorted(((score(e, names, evidence), i) for i, e in enumerate(entries)), reverse=True)
    if not ranked or ranked[0][0] < CONFIDENT or (len(ranked) > 1 and ranked[1][0] == ranked[0][0]):
        return None
    return entries[ranked[0][1]]
