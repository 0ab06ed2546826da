"""The one check guarding the state proofgym reuses (``proofgym/runtimes/private_dirs.py``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from proofgym.runtimes.private_dirs import (
    UnsafeStateDirError,
    check_private,
    override_dir,
    owned_entry,
    state_root,
    write_atomic,
)


def _dir(path: Path, mode: int) -> Path:
    path.mkdir()
    path.chmod(mode)
    return path


def test_a_private_directory_is_returned_resolved(tmp_path: Path) -> None:
    real = _dir(tmp_path / "real", 0o700)
    (tmp_path / "link").symlink_to(real)
    assert check_private(tmp_path / "link") == real.resolve()


@pytest.mark.parametrize("mode", [0o770, 0o707, 0o1777])
def test_a_directory_others_can_write_is_refused_even_sticky(tmp_path: Path, mode: int) -> None:
    with pytest.raises(UnsafeStateDirError, match="writable by others"):
        check_private(_dir(tmp_path / "d", mode))


def test_below_a_sticky_directory_is_fine_below_a_plain_shared_one_is_not(tmp_path: Path) -> None:
    sticky = _dir(tmp_path / "sticky", 0o1777)
    assert check_private(_dir(sticky / "mine", 0o700)) == (sticky / "mine").resolve()
    shared = _dir(tmp_path / "shared", 0o777)
    with pytest.raises(UnsafeStateDirError, match="shared is writable by others"):
        check_private(_dir(shared / "mine", 0o700))


def test_a_link_in_a_shared_directory_is_refused_though_its_target_is_private(tmp_path: Path) -> None:
    target = _dir(tmp_path / "target", 0o700)
    shared = _dir(tmp_path / "shared", 0o777)
    (shared / "link").symlink_to(target)
    with pytest.raises(UnsafeStateDirError, match="shared is writable by others"):
        check_private(shared / "link")


@pytest.mark.skipif(os.geteuid() != 0, reason="making another user's directory needs root")
def test_another_users_directory_is_refused(tmp_path: Path) -> None:
    theirs = _dir(tmp_path / "theirs", 0o755)
    os.chown(theirs, 4242, 4242)
    with pytest.raises(UnsafeStateDirError, match="belongs to uid 4242"):
        check_private(theirs)
    link = tmp_path / "link"
    link.symlink_to(_dir(tmp_path / "mine", 0o700))
    os.lchown(link, 4242, 4242)
    with pytest.raises(UnsafeStateDirError, match="link belongs to uid 4242"):
        check_private(link)
    (tmp_path / "mine" / "f").touch()
    os.chown(tmp_path / "mine" / "f", 4242, 4242)
    assert not owned_entry(tmp_path / "mine" / "f") and owned_entry(tmp_path / "mine")


def test_an_override_is_checked_and_made(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("PROOFGYM_TEST_DIR", raising=False)
    assert override_dir("PROOFGYM_TEST_DIR") is None
    monkeypatch.setenv("PROOFGYM_TEST_DIR", str(tmp_path / "a" / "b"))
    assert override_dir("PROOFGYM_TEST_DIR") == (tmp_path / "a" / "b").resolve()
    shared = _dir(tmp_path / "shared", 0o777)
    monkeypatch.setenv("PROOFGYM_TEST_DIR", str(shared / "c"))
    with pytest.raises(UnsafeStateDirError, match=r"\$PROOFGYM_TEST_DIR"):
        override_dir("PROOFGYM_TEST_DIR")


def test_the_state_root_is_the_users_and_no_one_elses(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    root = state_root()
    assert root == (Path("/var/cache/proofgym") if os.geteuid() == 0 else
                    (tmp_path / "xdg" / "proofgym").resolve())
    st = root.stat()
    assert st.st_uid == os.geteuid() and not st.st_mode & 0o022


def test_write_atomic_replaces_a_link_never_writes_through_it(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("kept")
    (tmp_path / "index.json").symlink_to(victim)
    write_atomic(tmp_path / "index.json", b"new")
    assert victim.read_text() == "kept"
    assert not (tmp_path / "index.json").is_symlink() and (tmp_path / "index.json").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index.json", "victim"]  # no temporary left
