"""Attack: forge the artifact with overlayfs's own metadata.

``snapshot()`` reads the overlay's upper directory, where a directory marked *opaque* hides the
whole lower directory (it was deleted and re-created). Inside a root-mounted overlay the kernel
keeps that mark in ``trusted.overlay.*`` and treats ``user.overlay.*`` as an ordinary attribute
the agent may set; a host reader that honours both lets the agent mark a directory opaque with no
effect in the sandbox, and the artifact then "deletes" files the agent never touched. The
artifact must match what the sandbox shows.
"""

from __future__ import annotations

import pytest

from tests.security.conftest import bash, python_inside

pytestmark = pytest.mark.sandbox


def test_an_attribute_the_agent_sets_does_not_delete_files_from_the_artifact(sandbox):
    # the ``sandbox`` fixture's snapshot holds old/a.txt and pkg/__init__.py
    r = python_inside(sandbox, """
import os
open('/workspace/old/b.txt', 'w').write('new')
for d in ('/workspace/old', '/workspace/pkg'):
    for name in ('user.overlay.opaque', 'trusted.overlay.opaque'):
        try:
            os.setxattr(d, name, b'y')
            print('SET', d, name)
        except OSError as exc:
            print('REFUSED', d, name, exc.errno)
""")
    assert "SET" in r.output or "REFUSED" in r.output, r.output
    inside = bash(sandbox, "cat old/a.txt pkg/__init__.py")
    assert "a" in inside.output and "VALUE = 1" in inside.output, inside  # nothing deleted inside
    files = sandbox.snapshot().files
    assert files.get("old/b.txt") == b"new", files
    deleted = sorted(str(p) for p, c in files.items() if c is None)
    assert deleted == [], f"the artifact deletes files the sandbox still has: {deleted}"
