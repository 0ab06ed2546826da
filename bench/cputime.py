"""CPU seconds of a process tree, sandboxes included: for bench/harness.py and the benches.

``getrusage(RUSAGE_CHILDREN)`` would miss most of it: a sandbox is forked by proofgym's spawner process,
which the probe never waits for, so the probe's reaped-children total never sees it. As root the
probe joins a ``cpuacct`` cgroup of its own (sandbox cgroups are created below the creator's, so
they are counted); otherwise the clock adds up ``/proc`` of every live descendant (their own and
their reaped children's time). That fallback misses every process that is re-parented out of
the tree before it is reaped, which is how sandboxes run (as root on this machine it counted
0.15 s of a CodeRepair grading the cgroup put at 1.1 s): it is a lower bound, and the table
names the source it used.
"""

from __future__ import annotations

import contextlib
import os
import resource
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

_CPUACCT = Path("/sys/fs/cgroup/cpuacct")


def _proc_cpu_s(pid: int | str) -> float:
    """utime + stime + cutime + cstime of one process, in seconds (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            ppid = int(Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


class CpuClock:
    """CPU seconds used by this process and every process it starts (see the module's docstring).

    ``source`` says how: ``"cpuacct cgroup"`` or ``"/proc of live descendants + getrusage"``.
    """

    def __init__(self) -> None:
        self.cgroup: Path | None = None
        # PROOFGYM_BENCH_CPU=proc: the fallback even as root (to compare the two sources)
        if (os.environ.get("PROOFGYM_BENCH_CPU") != "proc" and _CPUACCT.is_dir()
                and os.access(_CPUACCT, os.W_OK)):
            _sweep()
            d = _CPUACCT / f"proofgym-bench-{os.getpid()}"
            try:
                d.mkdir(exist_ok=True)
                (d / "cgroup.procs").write_text(str(os.getpid()))
                self.cgroup = d
            except OSError:
                with contextlib.suppress(OSError):
                    d.rmdir()
        self.source = ("cpuacct cgroup" if self.cgroup is not None
                       else "/proc of live descendants + getrusage: a LOWER BOUND (misses "
                            "sandboxes, which are not this process's children)")

    def __call__(self) -> float:
        if self.cgroup is not None:
            return int((self.cgroup / "cpuacct.usage").read_text()) / 1e9
        own = resource.getrusage(resource.RUSAGE_SELF)
        reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
        return (own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime
                + sum(_proc_cpu_s(pid) for pid in _descendants(os.getpid())))

    def close(self) -> None:
        """Leave the cgroup and remove it (a leftover sandbox still in it keeps it: the parent
        retries after this process exits, see :func:`remove_cgroup`)."""
        if self.cgroup is not None:
            with contextlib.suppress(OSError):
                (_CPUACCT / "cgroup.procs").write_text(str(os.getpid()))
            remove_cgroup(os.getpid(), wait_s=0.0)
            self.cgroup = None


def _sweep() -> None:
    """Remove empty bench cgroups whose process is gone (a bench killed before its cleanup)."""
    for d in _CPUACCT.glob("proofgym-bench-*"):
        pid = d.name.rsplit("-", 1)[1]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            with contextlib.suppress(OSError):
                d.rmdir()


def remove_cgroup(pid: int, wait_s: float = 2.0) -> None:
    """Remove the cpuacct cgroup of probe ``pid`` once it is empty (waits up to ``wait_s``)."""
    d = _CPUACCT / f"proofgym-bench-{pid}"
    deadline = time.monotonic() + wait_s
    while d.is_dir():
        try:
            d.rmdir()
            return
        except OSError:
            if time.monotonic() >= deadline:
                return
            time.sleep(0.1)


@dataclass
class Timed:
    """Wall and CPU seconds of one measured block (``with timed(clock) as t: ...``)."""

    wall_s: float = 0.0
    cpu_s: float = 0.0


@contextlib.contextmanager
def timed(clock: CpuClock) -> Iterator[Timed]:
    t = Timed()
    c0, w0 = clock(), time.perf_counter()
    try:
        yield t
    finally:
        t.wall_s, t.cpu_s = time.perf_counter() - w0, clock() - c0
