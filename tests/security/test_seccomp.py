"""Conformance of the sandbox's seccomp filter: every call it lists is denied inside a real
sandbox, with the errno the filter sets, and the kernel would have answered otherwise.

The list comes from :mod:`proofgym.runtimes.sandbox.seccomp` itself, so a call added there is
checked here too. Probes pass zero arguments: the filter answers before the kernel reads them.
"""

from __future__ import annotations

import errno
import json
import subprocess
import sys

import pytest

from proofgym.runtimes.sandbox import seccomp
from tests.security.conftest import bash, python_inside

pytestmark = pytest.mark.sandbox

_PROBE = """
import ctypes, json
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(nr, *args):
    ctypes.set_errno(0)
    ret = libc.syscall(nr, *[ctypes.c_ulong(a) for a in args])
    return [ret, ctypes.get_errno()]
out = {}
for name, nr in NUMBERS.items():
    out[name] = call(nr, 0, 0, 0, 0, 0, 0)
for name, flag in CLONE_FLAGS.items():
    # SIGCHLD as the exit signal and a flag that must be refused; a child would exit at once
    r = call(56, 17 | flag, 0, 0, 0, 0)
    if r[0] == 0:
        libc._exit(0)
    out["clone+" + name] = r
out["clone3"] = call(435, 0, 0)
for name, req in IOCTLS.items():
    out["ioctl+" + name] = call(16, 0, req, 0)
    out["ioctl+" + name + "+high-bits"] = call(16, 0, (1 << 32) | req, 0)
for value in PERSONALITIES:
    out["personality+" + hex(value)] = call(135, value)
    call(135, 0)  # back to plain Linux
print("RESULT " + json.dumps(out))
"""

#: personality values the filter allows (Docker's list) and some it must refuse
_ALLOWED_PERSONALITIES = seccomp.ALLOWED_PERSONALITIES
_REFUSED_PERSONALITIES = (0x0040000, 0x0400000, 0x0200000, 0x1, 0x6, 0x20001, 1 << 40 | 0x40000)


def _run_probe(runner, personalities) -> dict[str, list[int]]:
    numbers = seccomp.syscall_numbers()
    source = (f"NUMBERS = {numbers!r}\nCLONE_FLAGS = {seccomp.DENIED_CLONE_FLAGS!r}\n"
              f"IOCTLS = {seccomp.DENIED_IOCTLS!r}\nPERSONALITIES = {list(personalities)!r}\n"
              + _PROBE)
    text = runner(source)
    line = next((ln for ln in text.splitlines() if ln.startswith("RESULT ")), None)
    assert line is not None, text
    return json.loads(line[len("RESULT "):])


def test_filter_is_active_in_every_sandbox_process(rt):
    r = bash(rt, "grep Seccomp: /proc/self/status; sleep 0.2 & grep Seccomp: /proc/$!/status; wait")
    assert r.output.split() == ["Seccomp:", "2", "Seccomp:", "2"], r.output


def test_every_listed_call_is_denied_inside(rt):
    results = _run_probe(lambda src: python_inside(rt, src).output,
                         _ALLOWED_PERSONALITIES + _REFUSED_PERSONALITIES)
    expected_calls = set(seccomp.syscall_numbers())
    assert len(expected_calls) >= 45, expected_calls  # the list itself did not shrink unnoticed
    wrong = {}
    for name in expected_calls:
        if results[name] != [-1, errno.EPERM]:
            wrong[name] = results[name]
    for name in seccomp.DENIED_CLONE_FLAGS:
        if results[f"clone+{name}"] != [-1, errno.EPERM]:
            wrong[f"clone+{name}"] = results[f"clone+{name}"]
    if results["clone3"] != [-1, errno.ENOSYS]:  # so the C library falls back to clone
        wrong["clone3"] = results["clone3"]
    for name in seccomp.DENIED_IOCTLS:
        for key in (f"ioctl+{name}", f"ioctl+{name}+high-bits"):
            if results[key] != [-1, errno.EPERM]:
                wrong[key] = results[key]
    for value in _REFUSED_PERSONALITIES:
        if results[f"personality+{hex(value)}"] != [-1, errno.EPERM]:
            wrong[f"personality+{hex(value)}"] = results[f"personality+{hex(value)}"]
    for value in _ALLOWED_PERSONALITIES:
        if results[f"personality+{hex(value)}"][0] == -1:
            wrong[f"personality+{hex(value)} (allowed)"] = results[f"personality+{hex(value)}"]
    assert not wrong, f"not handled as the filter says: {wrong}"


_CONTROL = """
import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(nr, *args):
    ctypes.set_errno(0)
    ret = libc.syscall(nr, *[ctypes.c_ulong(a) for a in args])
    return [ret, ctypes.get_errno()]
buf = ctypes.create_string_buffer(8)
iov = (ctypes.c_ulong * 2)(ctypes.addressof(buf), 8)
print("RESULT " + json.dumps({
    "keyctl": call(250, 0, 0xFFFFFFFD, 0),  # KEYCTL_GET_KEYRING_ID of the session keyring
    "clone3": call(435, 0, 0),
    "ioctl+TIOCSTI": call(16, 0, 0x5412, 0),
    "personality+0x40000": call(135, 0x40000),
    "process_vm_readv": call(310, os.getpid(), ctypes.addressof(iov), 1, ctypes.addressof(iov), 1, 0),
}))
"""


def test_without_the_filter_the_kernel_answers_otherwise():
    """The control for the conformance test: harmless probes (they touch only the probing
    process) in an unfiltered process on the host get other answers, so ``EPERM``/``ENOSYS``
    inside is the filter's doing."""
    proc = subprocess.run([sys.executable, "-c", _CONTROL], capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL, cwd="/")
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line is not None, proc.stdout + proc.stderr
    results = json.loads(line[len("RESULT "):])
    assert results["keyctl"][0] > 0, results["keyctl"]
    assert results["clone3"][1] != errno.ENOSYS, results["clone3"]
    assert results["ioctl+TIOCSTI"][1] != errno.EPERM, results["ioctl+TIOCSTI"]  # ENOTTY
    assert results["personality+0x40000"][0] != -1, results["personality+0x40000"]
    assert results["process_vm_readv"][0] == 8, results["process_vm_readv"]


@pytest.mark.parametrize("what, code", [
    ("i386 getpid through int 0x80", "b8 14 00 00 00 cd 80 c3"),  # mov eax,20; int 0x80; ret
    ("x32 getpid", "b8 27 00 00 40 0f 05 c3"),  # mov eax,0x40000027; syscall; ret
])
def test_a_foreign_system_call_table_kills_the_process(rt, what, code):
    r = python_inside(rt, f"""
import ctypes, mmap
mem = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
mem.write(bytes.fromhex({code!r}))
addr = ctypes.addressof(ctypes.c_char.from_buffer(mem))
print("BEFORE", flush=True)
print("RETURNED", ctypes.CFUNCTYPE(ctypes.c_long)(addr)(), flush=True)
""")
    assert "BEFORE" in r.output, r.output
    assert "\nRETURNED " not in r.output, f"{what} went through: {r.output}"
    assert "[exit code 159]" in r.output, r.output  # 128 + SIGSYS
