"""The frozen final state of an episode, which graders read instead of the live runtime."""

from __future__ import annotations

import base64
import copy
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
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
            ``None`` for a deleted file. Only changes, never the untouched task snapshot.
        meta: Facts about how the snapshot was taken (for provenance, not for grading).

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

    @property
    def digest(self) -> str:
        """Content hash of the artifact (state and files), for keying and de-duplication."""
        return hashlib.sha256(orjson.dumps(self.to_dict(), option=orjson.OPT_SORT_KEYS)).hexdigest()

    def to_dict(self) -> dict[str, Any]:
        return {
            "runtime": self.runtime,
            "state": _jsonable(self.state),
            "files": {p: None if c is None else base64.b64encode(c).decode()
                      for p, c in sorted(self.files.items())},
            "meta": _jsonable(self.meta),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Artifact:
        return cls(
            runtime=data["runtime"],
            state=data.get("state", {}),
            files={p: None if c is None else base64.b64decode(c)
                   for p, c in data.get("files", {}).items()},
            meta=data.get("meta", {}),
        )


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


def _jsonable(value: Any) -> Any:
    return orjson.loads(orjson.dumps(value, default=repr, option=orjson.OPT_NON_STR_KEYS))
