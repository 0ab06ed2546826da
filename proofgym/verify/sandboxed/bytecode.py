"""Bytecode of a snapshot's modules for its grading sandboxes: compiled once on the host.

The runner runs with ``-B`` and every test process imports the project afresh, so without it
each one compiled the same modules from source again (10 ms a process and more, several
processes a grading: bench/p2p_cost.py). The snapshot is the task's own trusted tree; the
bytecode is compiled from it by the host's interpreter (used only where the sandbox runs that
same interpreter) and written, with the workspace files, into ``__pycache__`` beside each
source, as *checked* hash-based ``.pyc`` files: the importer reads the source and compares its
hash before it uses one, so a module the artifact changed (or a hidden file replaced) is
compiled from what it holds now, exactly as without this cache. Test files and ``conftest.py``
are left out: pytest rewrites and compiles them itself.
"""

from __future__ import annotations

import importlib.util
import marshal
import os
import sys
import threading
from collections.abc import Hashable, Iterable, Mapping
from pathlib import Path, PurePosixPath

#: Hash-based, checked against the source on every import (PEP 552 flags).
_CHECKED_HASH = (0b11).to_bytes(4, "little")
_CACHE: dict[Hashable, dict[str, tuple[str, bytes]]] = {}
_CACHE_MAX = 16
_LOCK = threading.Lock()


def _is_test_file(name: str) -> bool:
    return name == "conftest.py" or name.startswith("test_") or name.endswith("_test.py")


def pyc_path(source: str) -> str:
    """Where the sandbox's interpreter looks for the bytecode of the workspace file ``source``."""
    path = PurePosixPath(source)
    return str(path.parent / "__pycache__" / f"{path.stem}.{sys.implementation.cache_tag}.pyc")


def _compile(snapshot: Path) -> dict[str, tuple[str, bytes]]:
    out: dict[str, tuple[str, bytes]] = {}
    for folder, dirs, files in os.walk(snapshot):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
        for name in sorted(files):
            full = os.path.join(folder, name)
            if not name.endswith(".py") or _is_test_file(name) or os.path.islink(full):
                continue
            rel = Path(full).relative_to(snapshot).as_posix()
            try:
                source = Path(full).read_bytes()
                code = compile(source, f"/workspace/{rel}", "exec", dont_inherit=True, optimize=0)
            except (OSError, SyntaxError, ValueError):
                continue  # the test process compiles it (and reports its error) as before
            out[pyc_path(rel)] = (rel, b"".join([importlib.util.MAGIC_NUMBER, _CHECKED_HASH,
                                                 importlib.util.source_hash(source),
                                                 marshal.dumps(code)]))
    return out


def snapshot_bytecode(snapshot: Path, key: Hashable) -> dict[str, tuple[str, bytes]]:
    """``.pyc`` path -> (its source's path, the file's bytes) for the snapshot's modules, built
    once per ``key`` (the snapshot's identity) in this process."""
    with _LOCK:
        found = _CACHE.get(key)
    if found is None:
        found = _compile(snapshot)
        with _LOCK:
            while len(_CACHE) >= _CACHE_MAX:
                _CACHE.pop(next(iter(_CACHE)))
            _CACHE[key] = found
    return found


def staged_bytecode(compiled: Mapping[str, tuple[str, bytes]], written: Iterable[str]
                    ) -> dict[str, bytes]:
    """The ``.pyc`` files to write after the workspace files ``written`` (the artifact's
    changes and the grader's files): none for a source written there (its bytecode could not
    be used) and none whose path, or a directory on it, is one of those (it would replace what
    they put there)."""
    taken = set(written)
    return {pyc: data for pyc, (source, data) in compiled.items()
            if source not in taken and pyc not in taken
            and not any(str(p) in taken for p in PurePosixPath(pyc).parents)}
