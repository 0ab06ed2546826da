"""Attack: the kernel's rarely needed, often exploited system calls.

Defence in depth as container runtimes do it: a seccomp filter (``Seccomp: 2`` in the sandbox's
``/proc/self/status``) denies each call below with ``EPERM`` (or ``ENOSYS``), or kills the caller
(a foreign system call table), whatever the kernel's own settings would allow. Each probe uses
arguments that do nothing harmful if the call is (wrongly) allowed: a tiny io_uring, a zeroed
attribute block, a null module image, reading (never writing) another process.
"""

from __future__ import annotations

import errno

import pytest

from tests.security.conftest import invalidate_host_keys, python_inside

pytestmark = pytest.mark.sandbox

# x86_64 numbers; each probe's arguments are harmless if the call goes through
_PROBES = {
    "add_key": "libc.syscall(248, b'user', b'proofgym-attack-seccomp', b'x', 1, ctypes.c_int(-3))",
    "request_key": "libc.syscall(249, b'user', b'proofgym-attack-none', None, 0)",
    "keyctl": "libc.syscall(250, 0, -3, 0)",  # KEYCTL_GET_KEYRING_ID
    "io_uring_setup": "libc.syscall(425, 1, ctypes.byref(ctypes.create_string_buffer(120)))",
    "bpf": "libc.syscall(321, 0, ctypes.byref(ctypes.create_string_buffer(128)), 128)",
    "perf_event_open": "libc.syscall(298, ctypes.byref(attr), 0, -1, -1, 0)",
    "userfaultfd": "libc.syscall(323, 0)",
    "kexec_load": "libc.syscall(246, 0, 0, None, 0)",
    "kexec_file_load": "libc.syscall(320, -1, -1, 0, None, 0)",
    "init_module": "libc.syscall(175, None, 0, b'')",
    "finit_module": "libc.syscall(313, -1, b'', 0)",
    "delete_module": "libc.syscall(176, b'proofgym_attack_none', 0)",
    "mount": "libc.syscall(165, b'none', b'/tmp', b'tmpfs', 0, None)",
    "umount2": "libc.syscall(166, b'/tmp', 0)",
    "pivot_root": "libc.syscall(155, b'/tmp', b'/tmp')",
    "personality": "libc.syscall(135, 0x0040000)",  # ADDR_NO_RANDOMIZE: no ASLR for children
    "ptrace-attach-init": "libc.syscall(101, 0x4206, 1, None, None)",  # PTRACE_SEIZE pid 1
    "process_vm_readv-init": "libc.syscall(310, 1, ctypes.byref(iov), 1, ctypes.byref(iov), 1, 0)",
    "open_by_handle_at": "libc.syscall(304, -100, ctypes.byref(ctypes.create_string_buffer(136)), 0)",
    "swapon": "libc.syscall(167, b'/tmp/nothing', 0)",
    "reboot": "libc.syscall(169, 0, 0, 0, None)",  # bad magic: refused by the kernel anyway
    "acct": "libc.syscall(163, None)",
    # Docker's default profile denies these too
    "modify_ldt": "libc.syscall(154, 0, ctypes.byref(buf), 16)",  # read the LDT
    "kcmp": "libc.syscall(312, os.getpid(), 1, 0, 0, 0)",  # KCMP_FILE: compare with pid 1
    "pidfd_getfd-init": "libc.syscall(438, libc.syscall(434, 1, 0), 0, 0)",  # steal fd 0 of pid 1
    # the same calls through another system call table: x32 numbering, and i386 via int 0x80
    "x32-keyctl": "libc.syscall(0x40000000 + 250, 0, -3, 0)",
    "i386-keyctl": "int80(288, 0, 0xFFFFFFFD, 0)",  # keyctl(KEYCTL_GET_KEYRING_ID, -3, 0)
    "i386-personality": "int80(136, 0x0040000, 0, 0)",
}

_PRELUDE = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
attr = ctypes.create_string_buffer(128)
attr[4] = 128  # perf_event_attr.size
buf = ctypes.create_string_buffer(64)
class Iov(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
iov = Iov(ctypes.addressof(buf), 8)
import mmap
# push rbx; mov eax, NR; mov ebx, A; mov ecx, B; mov edx, C; int 0x80; pop rbx; ret
def int80(nr, a, b, c):
    code = (b"\\x53\\xb8" + nr.to_bytes(4, "little") + b"\\xbb" + a.to_bytes(4, "little")
            + b"\\xb9" + b.to_bytes(4, "little") + b"\\xba" + c.to_bytes(4, "little")
            + b"\\xcd\\x80\\x5b\\xc3")
    page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    page.write(code)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(page))
    ret = ctypes.CFUNCTYPE(ctypes.c_int)(addr)()
    if ret < 0:
        ctypes.set_errno(-ret)
        return -1
    return ret
"""


def test_seccomp_filter_is_active(rt):
    r = python_inside(rt, "print([ln for ln in open('/proc/self/status') if ln.startswith('Seccomp')])")
    assert "Seccomp:\\t2" in r.output, f"no seccomp filter in the sandbox: {r.output}"


@pytest.fixture
def no_keys_left():
    """The add_key probe links a key wherever it can when it is not denied: never leave it."""
    yield
    invalidate_host_keys()


@pytest.mark.parametrize("name", list(_PROBES))
def test_dangerous_call_is_denied(rt, name, no_keys_left):
    r = python_inside(rt, _PRELUDE + f"ret = {_PROBES[name]}\n"
                                     "print('RESULT', ret, ctypes.get_errno())")
    line = next((ln for ln in r.output.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:  # killed by the filter (SIGSYS, exit 128 + 31): denied as well
        assert "[exit code 159]" in r.output or "Bad system call" in r.output, r.output
        return
    ret, err = map(int, line.split()[1:])
    assert ret == -1 and err in (errno.EPERM, errno.ENOSYS), (
        f"{name} was not denied: returned {ret}, errno {errno.errorcode.get(err, err)}")
