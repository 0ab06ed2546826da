"""Attack: a directory tree deeper than the host's walker can follow.

Inside the sandbox, ``mkdir a && cd a`` in a loop builds a tree thousands of levels deep (each
system call sees a short relative path). A recursive walk on the host hits Python's recursion
limit, and absolute host paths pass ``PATH_MAX``: ``snapshot()`` must neither raise nor hang nor
silently drop the files; the artifact holds them or is marked over its path limit.
"""

from __future__ import annotations

import pytest

from tests.security.conftest import python_inside

pytestmark = pytest.mark.sandbox


@pytest.mark.parametrize("depth", [1200, 3000])
def test_snapshot_of_a_very_deep_tree(rt, depth):
    r = python_inside(rt, f"""
import os
for _ in range({depth}):
    os.mkdir('a')
    os.chdir('a')
open('bottom.txt', 'w').write('deep')
print('BUILT', len(os.getcwd()))
""")
    assert "BUILT" in r.output, r.output
    assert rt.execute("write_file", {"path": "top.txt", "content": "top"}).ok
    art = rt.snapshot()  # must not raise (RecursionError, ENAMETOOLONG)
    deep = [p for p in art.files if str(p).endswith("bottom.txt")]
    marked = any("limit" in str(k) for k in art.meta)
    assert deep or marked, (f"the deep file is silently missing from the artifact "
                            f"({len(art.files)} files, meta {dict(art.meta)})")
    if not marked:
        assert art.files.get("top.txt") == b"top", art.files.keys()
