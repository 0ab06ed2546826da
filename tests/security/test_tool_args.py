"""Attack: hurt the host through tool arguments (multi-MB commands and contents), and the
file tools' size limits (what is documented is what works)."""

from __future__ import annotations

import time

import pytest

from tests.security.conftest import bash

pytestmark = pytest.mark.sandbox


def test_a_multi_megabyte_command_is_refused_at_once(rt):
    command = "echo " + "x" * (4 << 20)
    start = time.monotonic()
    r = bash(rt, command)
    elapsed = time.monotonic() - start
    assert r.error_kind is not None and r.error_kind.value == "invalid_arguments", r.output[:200]
    assert "max" not in r.output or "limit" in r.output
    assert "write_file" in r.output  # says what to do instead
    assert elapsed < 1.0, f"refusing took {elapsed:.1f} s"


def test_a_command_just_under_the_limit_runs(rt):
    limit = rt.limits.max_command_bytes
    command = "true " + "x" * (limit - 20) + "; echo ran"
    r = bash(rt, command)
    assert r.ok and r.output == "ran", r.output[:200]


def test_content_over_the_limit_is_refused(rt):
    r = rt.execute("write_file", {"path": "big", "content": "x" * (rt.limits.max_file_bytes + 1)})
    assert r.error_kind is not None and r.error_kind.value == "invalid_arguments"
    assert len(r.output) < 500


def test_a_three_megabyte_file_is_written_and_read_back_within_the_time_limit(rt):
    content = ("0123456789abcdef" * 64 + "\n") * 3000  # ~3 MB, under the documented 4 MiB
    start = time.monotonic()
    w = rt.execute("write_file", {"path": "big.txt", "content": content})
    assert w.ok, w.output[:300]
    assert bash(rt, "wc -c < big.txt").output == str(len(content))
    r = rt.execute("read_file", {"path": "big.txt", "start_line": 2999, "end_line": 3000})
    assert r.ok and r.output == ("0123456789abcdef" * 64 + "\n") * 2, r.output[:300]
    assert time.monotonic() - start < rt.limits.command_timeout_s


def test_read_file_of_a_file_over_the_limit_is_a_short_error(rt):
    bash(rt, f"head -c {rt.limits.max_file_bytes + 1} /dev/zero > big")
    r = rt.execute("read_file", {"path": "big"})
    assert r.error_kind is not None and r.error_kind.value == "execution_error"
    assert "limit" in r.output and len(r.output) < 500, r.output[:500]


def test_file_tools_do_not_follow_links_out_of_the_workspace(rt):
    bash(rt, "ln -s /opt/python/bin/python3 py; ln -s /opt dir")
    r = rt.execute("read_file", {"path": "py"})
    assert r.error_kind is not None and "symbolic link" in r.output, r.output[:200]
    w = rt.execute("write_file", {"path": "dir/x.txt", "content": "x"})
    assert w.error_kind is not None and "symbolic link" in w.output, w.output[:200]
    assert rt.execute("list_dir", {"path": "dir"}).error_kind is not None


def test_file_tools_cannot_block_on_a_fifo(rt):
    bash(rt, "mkfifo pipe")
    start = time.monotonic()
    r = rt.execute("read_file", {"path": "pipe"})
    w = rt.execute("write_file", {"path": "pipe", "content": "x"})
    assert r.error_kind is not None and w.error_kind is not None, (r, w)
    assert time.monotonic() - start < 2.0
