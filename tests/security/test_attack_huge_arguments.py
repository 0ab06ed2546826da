"""Attack: tool arguments of several megabytes.

Each byte of a command or a file tool's argument travels through the host (quoting, pipes) before
the sandbox sees it; megabytes of it cost seconds past the command's time limit and hundreds of
MB of host memory. Arguments over a documented size are refused up front as ``invalid_arguments``.
(File content over the file tools' size was refused already before the hardening: the
``str_replace-new`` case and the 50 MB ``write_file`` guard that it stays so.)
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.sandbox

_MB = 1 << 20


@pytest.mark.parametrize(("tool", "args"), [
    ("bash", {"command": "echo " + "a" * (8 * _MB)}),
    ("bash", {"command": ": '" + "\\x01'$'" * (_MB) + "'"}),  # every byte quoted into four
    ("read_file", {"path": "d/" * (3 * _MB)}),
    ("list_dir", {"path": "d/" * (3 * _MB)}),
    ("str_replace", {"path": "f.txt", "old_str": "x" * (20 * _MB), "new_str": "y"}),
    ("str_replace", {"path": "f.txt", "old_str": "hello", "new_str": "y" * (20 * _MB)}),
    ("write_file", {"path": "p/" * (3 * _MB) + "f.txt", "content": "x"}),
], ids=["bash-8MB", "bash-quoting-blowup", "read_file-path", "list_dir-path",
        "str_replace-old", "str_replace-new", "write_file-path"])
def test_multi_megabyte_arguments_are_refused(rt, tool, args):
    assert rt.execute("write_file", {"path": "f.txt", "content": "hello\n"}).ok
    r = rt.execute(tool, args)
    assert r.error_kind == "invalid_arguments", f"{tool}: {str(r)[:300]}"
    # the refusal says what was too large, and the episode goes on
    assert len(r.output) < 2000, r.output[:300]
    assert rt.execute("bash", {"command": "cat f.txt"}).output == "hello"


def test_a_50_mb_write_file_is_refused(rt):
    r = rt.execute("write_file", {"path": "big.txt", "content": "x" * (50 * _MB)})
    assert r.error_kind == "invalid_arguments", str(r)[:300]
    assert "big.txt" not in rt.snapshot().files
