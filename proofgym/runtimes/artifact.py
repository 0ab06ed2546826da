"""The frozen final state of an episode, which graders read instead of the live runtime."""

from __future__ import annotations

import base64
import copy
import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any

import orjson


@dataclass(frozen=True)
class Artifact:
    """An immutable, serialisable snapshot of what an episode left behind.

    Attributes:
        runtime: The kind of runtime that produced it (``"inprocess"``, ``"sandbox"``, ...).
        state: JSON-like per-episode state (an in-process runtime's ``ToolContext.state``).
        files: Files the agent changed, by path relative to the workspace: new content, or
            ``None`` for a deleted file. Only changes, never the untouched task snapshot. A
            path that is not valid UTF-8 is held as ``os.fsdecode`` gives it (surrogate escapes).
        meta: Facts about how the snapshot was taken (for provenance, not for grading). A
            sandbox artifact over its limits has ``meta["limit_exceeded"]`` (a reason) and no
            files; graders score it 0.

    Invariant: an artifact is self-contained. It can be pickled or sent as JSON (``to_dict``) to
    another process or host, and grading it needs nothing from the env that produced it.
    """

    runtime: str
    state: Mapping[str, Any] = field(default_factory=dict)
    files: Mapping[str, bytes | None] = field(default_factory=dict)
    meta: Mapping[str, Any] = field(default_factory=dict)

    def view(self) -> ArtifactView:
        """A read-only, runtime-like view for ``Task.verify``."""
        return ArtifactView(self)

    @cached_property
    def digest(self) -> str:
        """Content hash of the artifact (state and files), for keying and de-duplication;
        computed once per artifact (it is frozen)."""
        return hashlib.sha256(orjson.dumps(self.to_dict(), option=orjson.OPT_SORT_KEYS)).hexdigest()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict. Paths that are not valid UTF-8 go to ``"raw_path_files"``, keyed
        by the base64 of their bytes, so every file name round-trips through JSON."""
        files: dict[str, str | None] = {}
        raw: dict[str, str | None] = {}
        for p, c in sorted(self.files.items()):
            content = None if c is None else base64.b64encode(c).decode()
            if _utf8(p):
                files[p] = content
            else:
                raw[base64.b64encode(os.fsencode(p)).decode()] = content
        out = {"runtime": self.runtime, "state": _jsonable(self.state), "files": files,
               "meta": _jsonable(self.meta)}
        if raw:
            out["raw_path_files"] = raw
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Artifact:
        files = {p: None if c is None else base64.b64decode(c)
                 for p, c in data.get("files", {}).items()}
        for p, c in data.get("raw_path_files", {}).items():
            files[os.fsdecode(base64.b64decode(p))] = None if c is None else base64.b64decode(c)
        return cls(runtime=data["runtime"], state=data.get("state", {}),
                   files=dict(sorted(files.items())), meta=data.get("meta", {}))


class ArtifactView:
    """What a grader sees in place of a runtime: the final state, read-only.

    ``state`` is a read-only mapping over a private deep copy, so a grader cannot alter the
    artifact (and through it another grader's view).
    """

    def __init__(self, artifact: Artifact) -> None:
        self.artifact = artifact
        self.state: Mapping[str, Any] = MappingProxyType(copy.deepcopy(dict(artifact.state)))

    @property
    def changed_files(self) -> Mapping[str, bytes | None]:
        return MappingProxyType(dict(self.artifact.files))

    def __repr__(self) -> str:
        return f"ArtifactView(runtime={self.artifact.runtime!r})"


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _printable(value: Any) -> Any:
    """``value`` with every string made valid UTF-8 (undecodable bytes as ``\\xNN``)."""
    if isinstance(value, str):
        return value if _utf8(value) else os.fsencode(value).decode("utf-8", "backslashreplace")
    if isinstance(value, Mapping):
        return {_printable(k): _printable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_printable(v) for v in value]
    return value


def _jsonable(value: Any) -> Any:
    try:
        data = orjson.dumps(value, default=repr, option=orjson.OPT_NON_STR_KEYS)
    except orjson.JSONEncodeError:  # a string that is not UTF-8 (a file name, say)
        data = orjson.dumps(_printable(value), default=repr, option=orjson.OPT_NON_STR_KEYS)
    return orjson.loads(data)
