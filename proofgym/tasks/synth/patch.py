"""Unified diffs: the committed form of an injected bug, made and applied exactly.

The applier is strict: each hunk must match the file at its stated line with its context, or the
patch is refused (a changed sdist or a wrong pin shows here, never as a different task).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping

from proofgym.core.errors import PatchError as PatchError

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def make_patch(changes: Mapping[str, tuple[bytes, bytes]], context: int = 3) -> str:
    """The unified diff of ``{path: (old, new)}``, files in sorted order."""
    out = []
    for path in sorted(changes):
        old, new = changes[path]
        a = old.decode("utf-8").splitlines(keepends=True)
        b = new.decode("utf-8").splitlines(keepends=True)
        for line in difflib.unified_diff(a, b, f"a/{path}", f"b/{path}", n=context):
            out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def patched_paths(patch: str) -> list[str]:
    """The files a patch changes."""
    return [line[6:].rstrip("\n") for line in patch.splitlines(keepends=True)
            if line.startswith("+++ b/")]


def apply_patch(files: Mapping[str, bytes], patch: str) -> dict[str, bytes]:
    """The new content of each file ``patch`` changes (``files`` holds the old content)."""
    result: dict[str, bytes] = {}
    lines = patch.splitlines(keepends=True)
    i = 0
    while i < len(lines):
        if not lines[i].startswith("--- "):
            i += 1
            continue
        if i + 1 >= len(lines) or not lines[i + 1].startswith("+++ b/"):
            raise PatchError(f"line {i + 1}: a '--- ' header without its '+++ b/' line")
        path = lines[i + 1][6:].rstrip("\n")
        if path not in files:
            raise PatchError(f"the patch changes {path}, which is not in the project")
        old = files[path].decode("utf-8").splitlines(keepends=True)
        new: list[str] = []
        at = 0
        i += 2
        while i < len(lines) and lines[i].startswith("@@"):
            m = _HUNK.match(lines[i])
            if m is None:
                raise PatchError(f"line {i + 1}: malformed hunk header {lines[i]!r}")
            start = int(m.group(1)) - (0 if m.group(2) == "0" else 1)
            want_old = int(m.group(2) or 1)
            want_new = int(m.group(4) or 1)
            if start < at:
                raise PatchError(f"{path}: hunks overlap or are out of order")
            new.extend(old[at:start])
            at = start
            i += 1
            # the header's counts say where the hunk ends (a removed line may itself start "--")
            while i < len(lines) and (want_old or want_new or lines[i].startswith("\\")):
                kind, text = lines[i][:1], lines[i][1:]
                if kind == "\\":
                    if new and new[-1].endswith("\n") and lines[i - 1][:1] in (" ", "+"):
                        new[-1] = new[-1][:-1]
                    i += 1
                    continue
                if kind not in (" ", "-", "+"):
                    raise PatchError(f"{path}: hunk ends early at patch line {i + 1}")
                if kind in (" ", "-"):
                    have = old[at] if at < len(old) else None
                    if have is None or have.rstrip("\n") != text.rstrip("\n"):
                        raise PatchError(f"{path}: line {at + 1} is {have!r}, the patch expects "
                                         f"{text!r}; the project's source differs from the pin")
                    at += 1
                    want_old -= 1
                    if kind == " ":
                        new.append(have)
                        want_new -= 1
                else:
                    new.append(text)
                    want_new -= 1
                i += 1
            if want_old or want_new:
                raise PatchError(f"{path}: a hunk is cut short")
        new.extend(old[at:])
        result[path] = "".join(new).encode("utf-8")
    if not result:
        raise PatchError("the patch changes no file")
    return result
