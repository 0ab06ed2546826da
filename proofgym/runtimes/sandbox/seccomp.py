"""The seccomp filter every sandboxed command runs under (bwrap ``--seccomp FD``).

Built with libseccomp's Python bindings (``pyseccomp``), not hand-written BPF, and exported once
per process. The model is Docker's default profile and Flatpak's bwrap filter, turned around:
everything is allowed except the kernel interfaces an unprivileged program has no business
using and that have a history of privilege-escalation bugs. Denied calls fail with ``EPERM``
(``clone3`` with ``ENOSYS``, so the C library falls back to ``clone``, whose flags the filter
can inspect); a system call of a foreign architecture (32-bit ``int 0x80`` on x86-64, x32)
kills the process, so no rule can be dodged through another system call table.
"""

from __future__ import annotations

import errno
import os
import tempfile
from functools import cache

from proofgym.runtimes.sandbox.system import SandboxSetupError

#: System calls refused outright (those missing on this architecture are left out).
DENIED_SYSCALLS: tuple[str, ...] = (
    # kernel keyrings: keys of the host and of earlier episodes
    "keyctl", "add_key", "request_key",
    # large, young kernel attack surfaces
    "io_uring_setup", "io_uring_enter", "io_uring_register", "bpf", "perf_event_open",
    "userfaultfd",
    # loading code into the kernel
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "create_module", "uselib",
    # the mount table (the old and the new mount API)
    "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsconfig",
    "fsmount", "fspick", "mount_setattr",
    # other processes' memory, files and descriptor tables
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    # the x86 local descriptor table (a source of kernel bugs; no program here needs it)
    "modify_ldt",
    # namespaces: the sandbox's are set up already
    "unshare", "setns",
    # host-wide state
    "acct", "swapon", "swapoff", "reboot", "settimeofday", "clock_settime", "adjtimex",
    "clock_adjtime", "syslog", "quotactl", "vhangup", "iopl", "ioperm", "lookup_dcookie",
    "nfsservctl", "_sysctl", "fanotify_init",
    # files by handle, bypassing the directory tree ("shocker")
    "open_by_handle_at", "name_to_handle_at",
)

#: ``ioctl`` requests refused: pushing input into the terminal, the Linux console's extras.
DENIED_IOCTLS: dict[str, int] = {"TIOCSTI": 0x5412, "TIOCLINUX": 0x541C}

#: ``clone`` flags refused (new namespaces).
DENIED_CLONE_FLAGS: dict[str, int] = {
    "CLONE_NEWNS": 0x00020000, "CLONE_NEWCGROUP": 0x02000000, "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000, "CLONE_NEWUSER": 0x10000000, "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000,
}

#: ``personality`` values allowed (Docker's list): Linux, 32-bit Linux, each with UNAME26, and
#: the query. Everything else (``ADDR_NO_RANDOMIZE``, ``READ_IMPLIES_EXEC``, ...) is refused.
ALLOWED_PERSONALITIES = (0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF)

_INSTALL = ("the sandbox's seccomp filter needs libseccomp and its Python bindings: "
            "pip install 'proofgym[sandbox]' (pyseccomp) and apt-get install -y libseccomp2 "
            "(Debian/Ubuntu)")


def _library():  # type: ignore[no-untyped-def]
    try:
        import pyseccomp
    except (ImportError, OSError) as exc:  # OSError: the bindings load libseccomp.so.2 at import
        raise SandboxSetupError(f"{_INSTALL} ({exc})") from exc
    return pyseccomp


@cache
def filter_program(contain_sessions: bool = False, count_own_cpu: bool = False) -> bytes:
    """The filter as a BPF program, in the form bwrap's ``--seccomp`` reads.

    With ``contain_sessions`` (a sandbox without a CPU cgroup: proofgym without root),
    ``setsid()`` succeeds without starting a session: every process of the sandbox stays in the
    one session bwrap made, so the kernel's autogroup, which gives each session one share of
    the CPU, shares it per sandbox (``tests/security/test_attack_cpu_hog.py``). Callers see
    success (0), as every caller that checks for ``-1`` expects.

    With ``count_own_cpu`` (a grading sandbox), ``perf_event_open`` is allowed for a counter of
    the calling process and its future children on any CPU (pid 0, cpu -1, compared as the
    whole register: anything else is refused): the grading runner counts the CPU time of every
    process a test starts, however it is reaped (:func:`guard_program` refuses the call again
    in test processes)."""
    sc = _library()
    eperm = sc.ERRNO(errno.EPERM)
    f = sc.SyscallFilter(sc.ALLOW)
    if contain_sessions:
        f.add_rule(sc.ERRNO(0), "setsid")
    f.set_attr(sc.Attr.ACT_BADARCH, sc.KILL_PROCESS)
    native = sc.system_arch()
    for name in DENIED_SYSCALLS:
        if count_own_cpu and name == "perf_event_open":
            f.add_rule(eperm, name, sc.Arg(1, sc.NE, 0))
            f.add_rule(eperm, name, sc.Arg(2, sc.NE, 0xFFFFFFFFFFFFFFFF))
        elif _exists(sc, native, name):
            f.add_rule(eperm, name)
    f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    for flag in DENIED_CLONE_FLAGS.values():
        # the flags are clone's first argument on every architecture but s390 (second there)
        f.add_rule(eperm, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    for request in DENIED_IOCTLS.values():
        # the kernel reads the request as 32 bits: compare only those, so high bits set by the
        # caller cannot slip past the rule
        f.add_rule(eperm, "ioctl", sc.Arg(1, sc.MASKED_EQ, 0xFFFFFFFF, request))
    _personality_rules(sc, f, eperm)
    with tempfile.TemporaryFile() as out:
        f.export_bpf(out)
        out.seek(0)
        return out.read()


#: Who a test process of a grading may not signal or change: the sandbox's init (pid 1) and the
#: grading runner (pid 2: bwrap's init starts the command as its one child).
GRADING_PROTECTED_PIDS = (1, 2)

#: ``(name, argument index)`` of the calls that act on another process named by pid (or, for
#: ``kill``-like calls, a negative process group or -1 for "all").
_PID_CALLS = (
    ("kill", 0), ("tkill", 0), ("tgkill", 0), ("tgkill", 1), ("rt_sigqueueinfo", 0),
    ("rt_tgsigqueueinfo", 0), ("rt_tgsigqueueinfo", 1), ("pidfd_open", 0), ("prlimit64", 0),
    ("sched_setaffinity", 0), ("sched_setscheduler", 0), ("sched_setparam", 0),
    ("sched_setattr", 0), ("migrate_pages", 0), ("move_pages", 0),
    # joining their process group would make "my group" (kill(0), PRIO_PGRP 0) theirs
    ("setpgid", 1),
)
#: ``(name, argument index of "which", its values that name a pid or group, index of "who")``
_WHICH_WHO_CALLS = (("setpriority", 0, (0, 1), 1), ("ioprio_set", 0, (1, 2), 1))
#: ... and the "which" values that name a whole user (every process of the uid): refused.
_WHOLE_USER = (("setpriority", 0, 2), ("ioprio_set", 0, 3))
_F_SETOWN, _F_SETOWN_EX = 8, 15
#: ``ioctl`` requests that set the owner a file signals (``FIOSETOWN``, ``SIOCSPGRP``)
#: or a terminal's foreground group (``TIOCSPGRP``): refused whatever their argument.
_OWNER_IOCTLS = (0x8901, 0x8902, 0x5410)
_CLONE_PARENT = 0x00008000


@cache
def guard_program(protected: tuple[int, ...] = GRADING_PROTECTED_PIDS) -> bytes:
    r"""A second filter, installed in each test process of a grading before any test code runs
    (over the sandbox's, which stays): it refuses with ``EPERM`` every call that would signal,
    ``prlimit``, renice, re-pin, re-schedule or change the I/O priority of a process in
    ``protected`` (the runner and the sandbox's init), whichever way it names them: by pid, by
    process group (a negative pid, or its own group once it joined theirs: ``setpgid`` into
    it is refused), as "all processes" (-1), as every process of the user, by a
    pidfd (``pidfd_send_signal`` is refused outright: a ``/proc/<pid>`` directory is a pidfd to
    it), or as a file's owner that ``SIGIO`` goes to (``F_SETOWN``; ``F_SETOWN_EX`` and the
    owner ``ioctl``\ s outright). ``clone(CLONE_PARENT)`` is refused too (a child of the runner's
    own), and so is ``perf_event_open``.

    The kernel reads a pid as 32 bits: only those are compared, so high bits set by the caller
    cannot slip past a rule. Everything else a test process does is left to the sandbox's
    filter; ``ptrace``, ``process_vm_*``, ``kcmp`` and ``pidfd_getfd`` are refused there."""
    sc = _library()
    eperm = sc.ERRNO(errno.EPERM)
    f = sc.SyscallFilter(sc.ALLOW)
    f.set_attr(sc.Attr.ACT_BADARCH, sc.KILL_PROCESS)
    native = sc.system_arch()
    low = 0xFFFFFFFF
    targets = sorted({p & low for p in protected} | {-p & low for p in protected} | {low})
    for name, index in _PID_CALLS:
        if _exists(sc, native, name):
            for value in targets:
                f.add_rule(eperm, name, sc.Arg(index, sc.MASKED_EQ, low, value))
    for name, which_at, whiches, who_at in _WHICH_WHO_CALLS:
        if _exists(sc, native, name):
            for which in whiches:
                for value in targets:
                    f.add_rule(eperm, name, sc.Arg(which_at, sc.MASKED_EQ, low, which),
                               sc.Arg(who_at, sc.MASKED_EQ, low, value))
    for name, which_at, which in _WHOLE_USER:
        if _exists(sc, native, name):
            f.add_rule(eperm, name, sc.Arg(which_at, sc.MASKED_EQ, low, which))
    for name in ("pidfd_send_signal", "perf_event_open"):
        if _exists(sc, native, name):
            f.add_rule(eperm, name)
    for value in targets:
        f.add_rule(eperm, "fcntl", sc.Arg(1, sc.MASKED_EQ, low, _F_SETOWN),
                   sc.Arg(2, sc.MASKED_EQ, low, value))
    f.add_rule(eperm, "fcntl", sc.Arg(1, sc.MASKED_EQ, low, _F_SETOWN_EX))
    for request in _OWNER_IOCTLS:
        f.add_rule(eperm, "ioctl", sc.Arg(1, sc.MASKED_EQ, low, request))
    f.add_rule(eperm, "clone", sc.Arg(0, sc.MASKED_EQ, _CLONE_PARENT, _CLONE_PARENT))
    with tempfile.TemporaryFile() as out:
        f.export_bpf(out)
        out.seek(0)
        return out.read()


def _personality_rules(sc, f, eperm: int) -> None:  # type: ignore[no-untyped-def]
    """``personality(x)`` is refused unless ``x`` is one of :data:`ALLOWED_PERSONALITIES`.

    libseccomp compares an argument once per rule, so "not one of these" is written as: the
    query is logged and allowed (its rule comes first in the generated program, which the
    conformance test checks), anything above the largest other allowed value is refused, and
    below it each bit that no allowed value has is refused.
    """
    f.add_rule(sc.LOG, "personality", sc.Arg(0, sc.EQ, 0xFFFFFFFF))
    allowed = [v for v in ALLOWED_PERSONALITIES if v != 0xFFFFFFFF]
    top = max(allowed)
    f.add_rule(eperm, "personality", sc.Arg(0, sc.GT, top))
    union = 0
    for v in allowed:
        union |= v
    for bit in range(top.bit_length()):
        if not union & (1 << bit):
            f.add_rule(eperm, "personality", sc.Arg(0, sc.MASKED_EQ, 1 << bit, 1 << bit))


def _exists(sc, arch: int, name: str) -> bool:  # type: ignore[no-untyped-def]
    try:
        return sc.resolve_syscall(arch, name) >= 0
    except (ValueError, OSError):
        return False


def syscall_numbers(names: tuple[str, ...] = DENIED_SYSCALLS) -> dict[str, int]:
    """Native system call numbers of ``names`` (those this architecture has)."""
    sc = _library()
    arch = sc.system_arch()
    return {n: sc.resolve_syscall(arch, n) for n in names if _exists(sc, arch, n)}


def program_fd(contain_sessions: bool = False, count_own_cpu: bool = False) -> int:
    """A pipe's read end holding :func:`filter_program` (bwrap reads it to the end once); the
    caller passes it to bwrap and closes it."""
    program = filter_program(contain_sessions, count_own_cpu)
    r, w = os.pipe()
    try:
        if len(program) > 65536:  # more than a pipe holds without a reader
            raise SandboxSetupError(f"the seccomp program is {len(program)} bytes, too large")
        os.write(w, program)
    except BaseException:
        os.close(r)
        raise
    finally:
        os.close(w)
    return r
