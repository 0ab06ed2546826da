"""Attack: a hostile environment image, and an agent on an image.

A layer tar is untrusted input to the host: entries that climb out (``..``, absolute names),
that write through a symbolic link (an absolute one to a host directory, then a file under it),
hard links to host files, device nodes and smuggled overlay attributes are refused or ignored
while unpacking, before anything reaches a sandbox. On a built image the threat model holds as
on the minimal system: the sandbox's uid is neither root nor the host's, no network, ``/proc``
masked, seccomp on, and only ``/workspace`` and ``/tmp`` writable (the image is read-only and
its cached layers never change).
"""

from __future__ import annotations

import io
import os
import stat
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from proofgym.runtimes.sandbox import ImageError, LayerError, OciImage, SandboxRuntime
from proofgym.runtimes.sandbox.images import unpack_layer
from tests.conftest import require_tool
from tests.runtimes.sandbox.image_helpers import (
    entry,
    layer_tar,
    release_layer,
    system_layer,
    write_layout,
)
from tests.sandbox_helpers import FAST_LIMITS, bash
from tests.security.conftest import process_uids

pytestmark = pytest.mark.sandbox


def _unpack(tmp_path: Path, entries) -> Path:
    dest = tmp_path / "layer"
    dest.mkdir()
    unpack_layer(io.BytesIO(layer_tar(entries)), dest)
    return dest


def test_dot_dot_entry_is_refused(tmp_path):
    with pytest.raises(LayerError, match=r"'\.\.' component"):
        _unpack(tmp_path, [entry("usr/../../escaped.txt", b"out")])
    assert not (tmp_path / "escaped.txt").exists()


def test_absolute_entry_is_refused(tmp_path):
    victim = tmp_path / "victim.txt"
    with pytest.raises(LayerError, match="absolute path"):
        _unpack(tmp_path, [entry(str(victim), b"owned")])
    assert not victim.exists()


def test_absolute_symlink_then_a_file_through_it_is_refused(tmp_path):
    victim = tmp_path / "host-dir"
    victim.mkdir()
    with pytest.raises(LayerError, match="not a directory"):
        _unpack(tmp_path, [entry("etc", kind=tarfile.SYMTYPE, link=str(victim)),
                           entry("etc/pwned", b"owned")])
    assert list(victim.iterdir()) == []


def test_relative_symlink_out_then_a_file_through_it_is_refused(tmp_path):
    with pytest.raises(LayerError, match="not a directory"):
        _unpack(tmp_path, [entry("a/up", kind=tarfile.SYMTYPE, link="../../.."),
                           entry("a/up/pwned.txt", b"owned")])
    assert not (tmp_path / "pwned.txt").exists() and not (tmp_path.parent / "pwned.txt").exists()


def test_a_file_over_an_absolute_symlink_replaces_the_link_not_its_target(tmp_path):
    victim = tmp_path / "host-file"
    victim.write_text("host\n")
    dest = _unpack(tmp_path, [entry("f", kind=tarfile.SYMTYPE, link=str(victim)),
                              entry("f", b"layer\n")])
    assert victim.read_text() == "host\n" and (dest / "f").read_text() == "layer\n"
    assert not (dest / "f").is_symlink()


@pytest.mark.parametrize("link", ["../../host.txt", "/etc/passwd", "sym"])
def test_hard_link_outside_the_layer_or_to_a_link_is_refused(tmp_path, link):
    (tmp_path / "host.txt").write_text("host\n")
    with pytest.raises(LayerError):
        _unpack(tmp_path, [entry("sym", kind=tarfile.SYMTYPE, link="/etc/passwd"),
                           entry("hl", kind=tarfile.LNKTYPE, link=link)])
    assert os.stat(tmp_path / "host.txt").st_nlink == 1


@pytest.mark.parametrize("kind", [tarfile.CHRTYPE, tarfile.BLKTYPE, tarfile.FIFOTYPE])
def test_device_nodes_are_refused(tmp_path, kind):
    with pytest.raises(LayerError, match="device node"):
        _unpack(tmp_path, [entry("dev-mem", kind=kind, devmajor=1)])
    assert not (tmp_path / "layer" / "dev-mem").exists()


def test_set_id_bits_and_smuggled_overlay_attributes_are_never_applied(tmp_path):
    info, data = entry("usr/bin/su", b"#!/bin/sh\n", mode=0o4755)
    info.pax_headers = {"SCHILY.xattr.user.overlay.redirect": "/etc",
                        "SCHILY.xattr.trusted.overlay.opaque": "y"}
    dest = _unpack(tmp_path, [(info, data)])
    st = os.stat(dest / "usr/bin/su")
    assert not st.st_mode & (stat.S_ISUID | stat.S_ISGID) and st.st_mode & 0o777 == 0o755
    assert not [a for a in os.listxattr(dest / "usr/bin/su") if "overlay" in a]


def test_a_bad_whiteout_is_refused(tmp_path):
    with pytest.raises(LayerError, match="not a valid whiteout"):
        _unpack(tmp_path, [entry("etc/.wh..")])


def test_a_malicious_layer_never_becomes_an_image(tmp_path, monkeypatch):
    monkeypatch.setenv("PROOFGYM_CACHE", str(tmp_path / "cache"))
    victim = tmp_path / "victim"
    victim.mkdir()
    dest = tmp_path / "layout"
    write_layout(dest, [layer_tar([entry("x", kind=tarfile.SYMTYPE, link=str(victim)),
                                   entry("x/pwned", b"owned")])])
    with pytest.raises(ImageError, match="not a directory"):
        OciImage(str(dest)).build()
    assert list(victim.iterdir()) == []
    layers = tmp_path / "cache" / "images" / "layers"
    assert not layers.exists() or list(layers.iterdir()) == []  # nothing half-built is kept


# ------------------------------------------------------------------ an agent on an image
@pytest.fixture(scope="module")
def on_image(tmp_path_factory) -> Iterator[tuple[SandboxRuntime, OciImage]]:
    require_tool("bwrap")
    root = tmp_path_factory.mktemp("attack-image")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PROOFGYM_CACHE", str(root / "cache"))
        write_layout(root / "layout", [system_layer(), release_layer("attack\n")])
        image = OciImage(str(root / "layout")).build()
        rt = SandboxRuntime(image=image, limits=FAST_LIMITS, prestart=False)
        try:
            yield rt, image
        finally:
            rt.close()


def test_uid_is_neither_root_nor_the_hosts(on_image):
    rt, _ = on_image
    r = bash(rt, "id -u; id -g; grep ^CapEff: /proc/self/status")
    assert r.output.split("\n") == ["1000", "1000", "CapEff:\t0000000000000000"], r.output
    pids = [rt._shell.proc.pid, *(host for host, _ in rt._shell._sandbox_processes())]
    uids = [u for u in map(process_uids, pids) if u is not None]
    assert len(uids) >= 2 and all(0 not in u for u in uids if os.geteuid() == 0), uids
    want = rt._shell.proc.lease.uid if os.geteuid() == 0 else os.getuid()
    assert all(u == [want] * 4 for u in uids), uids  # as root: a leased uid, never the host's


def test_no_network(on_image):
    rt, _ = on_image
    r = bash(rt, "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 53), 2)\" "
                 "2>&1 | tail -1; grep -c : /proc/net/dev")
    last, interfaces = r.output.rsplit("\n", 1)
    assert "Network is unreachable" in last and interfaces == "1", r.output  # lo only


def test_proc_is_masked_and_seccomp_is_on(on_image):
    rt, _ = on_image
    assert Path("/proc/vmstat").read_text() and Path("/proc/interrupts").read_text()
    r = bash(rt, "cat /proc/keys /proc/vmstat /proc/interrupts 2>/dev/null | wc -c; "
                 "grep '^Seccomp:' /proc/self/status; "
                 "{ echo 1 > /proc/sys/kernel/ns_last_pid; } 2>/dev/null && echo WROTE || echo ro; "
                 "python3 -c \"import ctypes; l = ctypes.CDLL(None, use_errno=True); "
                 "print(l.syscall(250, 0, -3, 0), ctypes.get_errno())\"")
    lines = r.output.split("\n")
    assert len(lines) == 4, r.output
    keys, secc, proc_sys, keyctl = lines
    assert keys == "0" and secc.split() == ["Seccomp:", "2"] and proc_sys == "ro", r.output
    result, err = keyctl.split()
    assert result == "-1" and int(err) in (1, 38), r.output  # EPERM or ENOSYS


def test_only_workspace_and_tmp_are_writable_and_layers_never_change(on_image):
    rt, image = on_image
    layers = [Path(os.path.realpath(image.root / name)) for name in ("l0", "l1")]

    def listing() -> list[tuple[str, int]]:
        return sorted((str(p), p.lstat().st_mode) for layer in layers for p in layer.rglob("*")
                      if p.parts[-2] in ("etc", "bin", "lib", "opt") or p.parent == layer)

    before = listing()
    r = bash(rt, "for d in / /etc /usr /usr/bin /opt /opt/python/lib; do "
                 "touch $d/pwned 2>/dev/null && echo \"WROTE $d\"; done; "
                 "chmod 777 /usr/bin/bash 2>/dev/null && echo CHMOD; "
                 "rm -f /etc/image-release 2>/dev/null; cat /etc/image-release; "
                 "touch /workspace/ok /tmp/ok && echo writable")
    assert r.output == "attack\nwritable", r.output
    assert listing() == before
    assert not (layers[1] / "usr" / "pwned").exists() and not (layers[0] / "etc" / "pwned").exists()


def test_the_cache_path_is_not_visible_inside(on_image):
    rt, image = on_image
    layer_dir = os.path.realpath(image.root / "l0")
    r = bash(rt, f"grep -c -F {layer_dir} /proc/self/mountinfo; grep -c overlay /proc/self/mountinfo")
    hidden, overlays = r.output.split("\n")
    assert hidden == "0" and int(overlays) >= 3, r.output  # the image's mounts name no host path
