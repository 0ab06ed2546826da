"""Per-sandbox cgroups (when the host lets us write them): a process cap that also holds for a
sandbox whose user is mapped to root, memory accounting that tells an out-of-memory kill apart
from any other crash, and a CPU group of its own.

The CPU group makes the scheduler share CPU between sandboxes, not between their processes: a
sandbox running 64 busy loops (each in a session of its own, which defeats the kernel's
autogroups) gets one sandbox's share, as a neighbour with one process does
(``tests/security/test_attack_cpu_hog.py``). ``SandboxLimits.cpus`` caps it further (a CFS quota).

Without a writable cgroup hierarchy the sandbox still has ``RLIMIT_AS`` and ``RLIMIT_NPROC``;
``RLIMIT_NPROC`` is not enforced for processes that are root on the host, so running as root
without cgroups is refused (see :func:`create`).
"""

from __future__ import annotations

import itertools
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from proofgym.runtimes.sandbox.namespaces import release_cgroup
from proofgym.runtimes.sandbox.scratch import pid_namespace

_ROOT = Path("/sys/fs/cgroup")
_counter = itertools.count()
_swept: set[bool] = set()  # sweep stale cgroups once per process
#: The spawner's per-cgroup helper is in the cgroup too: the sandbox's own cap is unchanged.
_HELPER = 1


@dataclass
class SandboxCgroup:
    """The cgroup directories of one sandbox (one per v1 controller, or one v2 directory)."""

    dirs: tuple[Path, ...]
    v2: bool
    _files: dict[str, str | None] = field(default_factory=dict, init=False, repr=False,
                                          compare=False)

    def procs_files(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs]

    def oom_kills(self) -> int:
        """How many processes the kernel killed for exceeding the memory limit (monotonic)."""
        return _read_counter(self._file("memory.events" if self.v2 else "memory.oom_control"),
                             b"oom_kill")

    def pids_limit_hits(self) -> int:
        return _read_counter(self._file("pids.events"), b"max")

    def memory_limit_hits(self) -> int:
        """How many times the sandbox's memory use reached its limit (monotonic): files on a
        tmpfs that fill the memory make every later allocation hit it, with no process to kill."""
        if self.v2:
            return _read_counter(self._file("memory.events"), b"max")
        path = self._file("memory.failcnt")
        try:
            return int(Path(path).read_bytes()) if path is not None else 0
        except (OSError, ValueError):  # the cgroup is gone
            return 0

    def _file(self, name: str) -> str | None:
        """The first of the directories' ``name`` files that exists (looked up once: read twice
        per tool call)."""
        if name not in self._files:
            self._files[name] = next((str(d / name) for d in self.dirs if (d / name).exists()), None)
        return self._files[name]

    def cpu_seconds(self) -> float | None:
        """CPU time used by the sandbox's processes so far (``None`` without a CPU group)."""
        for d in self.dirs:
            usage = d / "cpuacct.usage"
            if usage.exists():
                return int(usage.read_text()) / 1e9
            stat = d / "cpu.stat"
            if self.v2 and stat.exists():
                for line in stat.read_text().splitlines():
                    key, _, value = line.partition(" ")
                    if key == "usage_usec":
                        return int(value) / 1e6
        return None

    def pids(self) -> list[int]:
        pids: set[int] = set()
        for f in self.procs_files():
            try:
                pids.update(int(x) for x in Path(f).read_text().split())
            except OSError:
                continue
        return sorted(pids)

    def kill(self) -> None:
        """SIGKILL every process in the cgroup (all of them a sandbox's, once :meth:`release`
        has had the spawner's helper leave). Each is signalled through a pidfd opened before its
        membership is checked: a pid reused between the listing and the check belongs to another
        cgroup and is passed over. What a sandbox's bwrap started can outlive it (its pid 1 was
        seen reparented to init), so waiting for the bwraps is not enough."""
        import signal

        name = self.dirs[0].name.encode() if self.dirs else b""
        for pid in self.pids():
            try:
                pidfd = os.pidfd_open(pid)
            except OSError:
                continue
            try:
                with open(f"/proc/{pid}/cgroup", "rb") as f:
                    if b"/" + name + b"\n" in f.read() + b"\n":
                        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            except OSError:
                continue
            finally:
                os.close(pidfd)

    def release(self) -> None:
        """Have the spawner's helper leave (it joins a cgroup that starts several sandboxes:
        ``Loop`` in ``proofgym/programs/spawner.py``); then :meth:`pids` is the sandbox's."""
        release_cgroup(self.procs_files())

    def remove(self) -> None:
        self.release()
        for d in self.dirs:
            try:
                d.rmdir()
            except OSError:
                continue


def _read_counter(path: str | None, key: bytes) -> int:
    """The value of ``key`` in the ``KEY VALUE`` file ``path`` (0 when there is none)."""
    if path is None:
        return 0
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:  # the cgroup is gone
        return 0
    try:
        data = os.read(fd, 4096)
    finally:
        os.close(fd)
    for line in data.splitlines():
        name, _, value = line.partition(b" ")
        if name == key:
            return int(value)
    return 0


def _own_path(controller: str) -> str:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(",") or (controller == "" and controllers == ""):
            return path.lstrip("/")
    return ""


def _sweep(parent: Path) -> None:
    """Remove empty cgroups left by proofgym processes that died without closing them.

    Only the ones made in this pid namespace (the name says which): the hierarchy is the
    kernel's, shared with proofgym instances in other pid namespaces (containers), whose pids
    mean nothing here, so a live one's cgroup, empty between two of its sandboxes, would look
    like a dead one's leftover (``tests/security/test_attack_other_instance_sweep.py``)."""
    ours = pid_namespace()
    if ours is None:
        return
    for d in parent.glob("proofgym-*-*"):
        parts = d.name.split("-")
        if len(parts) != 5 or not (parts[1].isdigit() and parts[2].isdigit()):
            continue  # not a sandbox cgroup, or made by a proofgym that did not name its namespace
        pid, namespace = int(parts[1]), int(parts[2])
        if namespace == ours and pid != os.getpid() and not Path(f"/proc/{pid}").exists():
            try:
                d.rmdir()
            except OSError:
                continue


_CFS_PERIOD_US = 100_000


def _v1_cpu_hierarchies() -> list[tuple[Path, str]]:
    """The v1 hierarchies for CPU scheduling and accounting (``cpu`` and ``cpuacct``, once
    each when they are mounted together as ``cpu,cpuacct``)."""
    found: list[tuple[Path, str]] = []
    seen: set[str] = set()
    for ctrl in ("cpu", "cpuacct"):
        root = _ROOT / ctrl
        if (root / "cgroup.procs").exists() and os.path.realpath(root) not in seen:
            seen.add(os.path.realpath(root))
            found.append((root, ctrl))
    return found


def create(memory_bytes: int, max_processes: int,
           cpus: float | None = None) -> SandboxCgroup | None:
    """A fresh cgroup with the limits set, or ``None`` when cgroups are not writable here.
    ``cpus``: a CPU quota in CPUs (``None``: a fair share only)."""
    # the pid and its namespace say whose it is (for the sweep; 0: a /proc of another pid
    # namespace, never swept); the random part keeps a name this process's pid had before (a
    # dead process's leftover with the same pid, which the sweep keeps) from colliding
    name = (f"proofgym-{os.getpid()}-{pid_namespace() or 0}-{next(_counter)}-"
            f"{secrets.token_hex(4)}")
    v1 = [(_ROOT / "pids", "pids"), (_ROOT / "memory", "memory")]
    if all((root / "cgroup.procs").exists() for root, _ in v1):
        made: list[Path] = []
        try:
            for root, ctrl in [*v1, *_v1_cpu_hierarchies()]:
                parent = root / _own_path(ctrl)
                if not _swept:
                    _sweep(parent)
                d = parent / name
                d.mkdir()
                made.append(d)
            _swept.add(True)
            (made[0] / "pids.max").write_text(str(max_processes + _HELPER))
            (made[1] / "memory.limit_in_bytes").write_text(str(memory_bytes))
            memsw = made[1] / "memory.memsw.limit_in_bytes"
            if memsw.exists():
                memsw.write_text(str(memory_bytes))
            for d in made[2:]:
                if (d / "cpu.shares").exists():
                    (d / "cpu.shares").write_text("1024")  # one sandbox, one nice-0 share
                    if cpus is not None:
                        (d / "cpu.cfs_period_us").write_text(str(_CFS_PERIOD_US))
                        (d / "cpu.cfs_quota_us").write_text(str(max(1000, int(cpus * _CFS_PERIOD_US))))
            return SandboxCgroup(tuple(made), v2=False)
        except OSError:
            SandboxCgroup(tuple(made), v2=False).remove()
    unified = _ROOT / "cgroup.controllers"
    if unified.exists():
        base = _ROOT / _own_path("")
        try:
            if not {"pids", "memory"} <= set((base / "cgroup.controllers").read_text().split()):
                return None
            d = base / name
            d.mkdir()
            (d / "pids.max").write_text(str(max_processes + _HELPER))
            (d / "memory.max").write_text(str(memory_bytes))
            (d / "memory.swap.max").write_text("0") if (d / "memory.swap.max").exists() else None
            if (d / "cpu.weight").exists():
                (d / "cpu.weight").write_text("100")
                if cpus is not None:
                    quota = max(1000, int(cpus * _CFS_PERIOD_US))
                    (d / "cpu.max").write_text(f"{quota} {_CFS_PERIOD_US}")
            return SandboxCgroup((d,), v2=True)
        except OSError:
            return None
    return None
