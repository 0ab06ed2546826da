"""Attack: the kernel keyrings, which no namespace of bubblewrap 0.8 separates.

A sandbox sharing the host's session (or user-session) keyring and host uid can read the keys
of the process that started it (API tokens live there), and a key it links into a shared keyring
outlives the episode: the next episode (another task, possibly another policy's) reads it.
The host's keys are added and removed through raw ``add_key``/``keyctl`` system calls.
"""

from __future__ import annotations

import ctypes
import secrets

import pytest

from tests.security.conftest import KEY_TAG, host_keys, invalidate_host_keys, python_inside

pytestmark = pytest.mark.sandbox

_libc = ctypes.CDLL(None, use_errno=True)
_SYS_ADD_KEY = 248  # x86_64
_KEY_SPEC_SESSION_KEYRING = -3

# Inside: every way a process finds a key (its keyrings, and /proc/keys for key ids), then reads it.
_READ_ANY = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
KEYCTL = 250
desc = {desc!r}
ids = set()
for ring in (-1, -2, -3, -4, -5):
    k = libc.syscall(KEYCTL, 10, ring, b"user", desc.encode(), 0)  # KEYCTL_SEARCH
    if k > 0:
        ids.add(k)
try:
    for line in open("/proc/keys"):
        if desc in line:
            ids.add(int(line.split()[0], 16))
except OSError:
    pass
for k in sorted(ids):
    buf = ctypes.create_string_buffer(256)
    n = libc.syscall(KEYCTL, 11, k, buf, 256)  # KEYCTL_READ
    print("key", k, "read", n, buf.raw[:max(n, 0)].decode(errors="replace"))
print("searched", len(ids))
"""


@pytest.fixture
def clean_keys():
    invalidate_host_keys()
    try:
        yield
    finally:
        invalidate_host_keys()


def test_keys_of_the_host_process_are_not_readable_inside(rt, clean_keys):
    desc = f"{KEY_TAG}-host-{secrets.token_hex(4)}"
    secret = f"HOST-SECRET-{secrets.token_hex(8)}".encode()
    key = _libc.syscall(_SYS_ADD_KEY, b"user", desc.encode(), secret, len(secret),
                        ctypes.c_int(_KEY_SPEC_SESSION_KEYRING))
    assert key > 0, f"add_key on the host failed (errno {ctypes.get_errno()})"
    r = python_inside(rt, _READ_ANY.format(desc=desc))
    assert "searched" in r.output, r.output  # the probe itself ran
    assert secret.decode() not in r.output, f"the sandbox read a key of the host: {r.output}"


def test_a_key_linked_in_one_episode_is_gone_in_the_next(rt, clean_keys):
    desc = f"{KEY_TAG}-persist-{secrets.token_hex(4)}"
    token = f"CROSS-EPISODE-{secrets.token_hex(8)}"
    # episode 1: link a world-readable key into every keyring it can name, by id where possible
    plant = f"""
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
payload = {token!r}.encode()
linked = 0
for spec in (-3, -4, -5):
    ring = libc.syscall(250, 0, spec, 0)  # KEYCTL_GET_KEYRING_ID, no create
    for target in {{spec, ring}} - {{-1}}:
        k = libc.syscall(248, b"user", {desc!r}.encode(), payload, len(payload), ctypes.c_int(target))
        if k > 0:
            libc.syscall(250, 5, k, 0x3f3f3f3f)  # KEYCTL_SETPERM: anyone may read it
            linked += 1
print("linked", linked)
"""
    planted = python_inside(rt, plant)
    assert "linked" in planted.output, planted.output
    rt.reset()
    r = python_inside(rt, _READ_ANY.format(desc=desc))
    assert "searched" in r.output, r.output
    assert token not in r.output, f"a key from the previous episode is readable: {r.output}"
    assert not host_keys(desc), f"the episode left keys on the host: {host_keys(desc)}"
