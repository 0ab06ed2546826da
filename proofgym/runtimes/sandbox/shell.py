"""A persistent shell inside a sandbox: one ``bash`` per episode, one write and one read per
command.

Protocol: each command is sent as one line,
``{ eval $'COMMAND'; } </dev/null 2>&1; printf '\\n\\036NONCE:%d\\n' "$?"``, and its output is
read until the marker with that command's random nonce. The command runs in the shell itself,
so ``cd`` and ``export`` persist between calls. On a timeout or too much output, every process
of the sandbox except its init and the shell is killed; the shell then prints the marker and
stays usable. If the shell itself is what hangs (a busy builtin loop) or it exits, the caller
starts a new one over the same files.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import select
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from proofgym.runtimes.sandbox.cgroups import SandboxCgroup
from proofgym.runtimes.sandbox.system import SandboxSetupError

_GRACE_S = 2.0
_MEMORY_PATTERNS = re.compile(rb"MemoryError|Cannot allocate memory|std::bad_alloc|out of memory",
                              re.IGNORECASE)
_PROCESS_PATTERNS = re.compile(rb"fork: retry|Resource temporarily unavailable|can't start new thread")


def ansi_c_quote(text: str) -> str:
    """``text`` as a bash ``$'...'`` word (any bytes except NUL, which bash cannot hold)."""
    out = ["$'"]
    for b in text.encode("utf-8", "surrogateescape"):
        if b == 0:
            continue
        if b == 0x5C:
            out.append("\\\\")
        elif b == 0x27:
            out.append("\\'")
        elif 0x20 <= b < 0x7F:
            out.append(chr(b))
        else:
            out.append(f"\\x{b:02x}")
    out.append("'")
    return "".join(out)


@dataclass(frozen=True)
class CommandOutcome:
    """What one command did. ``exit_code`` is ``None`` when no status was read (timeout, lost shell)."""

    output: bytes
    exit_code: int | None
    timed_out: bool = False
    output_exceeded: bool = False
    out_of_memory: bool = False
    process_limit: bool = False
    shell_lost: bool = False
    stragglers: int = 0  # processes still running when the command returned (they were killed)


class PersistentShell:
    """The ``bash`` of one running sandbox, started by :func:`bwrap.spawn`."""

    def __init__(self, proc: subprocess.Popen[bytes], cgroup: SandboxCgroup | None,
                 max_output_bytes: int, *, pidns: str | None = None) -> None:
        self.proc = proc
        self.cgroup = cgroup
        self.max_output_bytes = max_output_bytes
        assert proc.stdin is not None and proc.stdout is not None
        self._in = proc.stdin.fileno()
        self._out = proc.stdout.fileno()
        os.set_blocking(self._out, False)
        self._poll = select.poll()
        self._poll.register(self._out, select.POLLIN | select.POLLHUP | select.POLLERR)
        self.inner_pid: int | None = None
        self._pidns: str | None = pidns

    # ------------------------------------------------------------------ start
    def wait_ready(self, timeout_s: float = 20.0) -> None:
        """Wait for the shell's greeting; a sandbox that fails to start raises with its output."""
        # From here the shell's own stderr (job notices such as "Killed") is dropped: commands
        # send theirs to the output pipe explicitly.
        self._write(b"exec 2>/dev/null; builtin printf '\\036ready:%d\\n' \"$$\"\n")
        buf = bytearray()
        deadline = time.monotonic() + timeout_s
        while True:
            m = re.search(rb"\x1eready:(\d+)\n", buf)
            if m:
                self.inner_pid = int(m.group(1))
                return
            chunk = self._read(deadline)
            if chunk is None or chunk == b"":
                self.kill()
                raise SandboxSetupError(
                    "the sandbox failed to start"
                    + (" (timed out)" if chunk is None else "")
                    + f": {bytes(buf).decode(errors='replace').strip() or 'no output'}")
            buf += chunk

    # -------------------------------------------------------------------- run
    def run(self, command: str, timeout_s: float) -> CommandOutcome:
        nonce = secrets.token_hex(8).encode()
        line = (f"{{ eval {ansi_c_quote(command)}\n}} </dev/null 2>&1; "
                f"builtin printf '\\n\\036%s:%d\\n' {nonce.decode()} \"$?\"\n")
        before = self._counters()
        if not self._write(line.encode()):
            return CommandOutcome(b"", None, shell_lost=True)
        marker = b"\n\x1e" + nonce + b":"
        head = bytearray()
        tail = bytearray()  # the last bytes after the output limit, to find the marker
        total = 0
        timed_out = exceeded = False
        deadline = time.monotonic() + timeout_s
        while True:
            buf = tail if exceeded else head
            idx = buf.find(marker)
            if idx >= 0:
                end = buf.find(b"\n", idx + len(marker))
                if end >= 0:
                    code = int(buf[idx + len(marker):end] or b"-1")
                    output = bytes(head if exceeded else head[:idx])
                    return self._outcome(output, code, timed_out, exceeded, before)
            chunk = self._read(deadline)
            if chunk is None:  # deadline passed
                if timed_out or exceeded:
                    return self._outcome(bytes(head[: self.max_output_bytes]), None, timed_out,
                                         exceeded, before, lost=True)
                timed_out = True
                self.kill_commands()
                deadline = time.monotonic() + _GRACE_S
                continue
            if chunk == b"":  # the shell exited
                return self._outcome(bytes(head[: self.max_output_bytes] if not exceeded else head),
                                     None, timed_out, exceeded, before, lost=True)
            total += len(chunk)
            if exceeded:
                tail = (tail + chunk)[-(len(marker) + 32):]
            else:
                head += chunk
                if total > self.max_output_bytes and head.find(marker) < 0:
                    exceeded = True
                    tail = head[self.max_output_bytes:][-(len(marker) + 32):]
                    del head[self.max_output_bytes:]
                    self.kill_commands()
                    deadline = time.monotonic() + _GRACE_S

    def _outcome(self, output: bytes, code: int | None, timed_out: bool, exceeded: bool,
                 before: tuple[int, int], *, lost: bool = False) -> CommandOutcome:
        stragglers = 0 if lost else self._end_stragglers()
        if stragglers:
            self._drain()
        oom, pids = self._counters()
        failed = code is None or code != 0
        out_of_memory = oom > before[0] or (failed and bool(_MEMORY_PATTERNS.search(output[-4096:])))
        process_limit = pids > before[1] or (
            self.cgroup is None and failed and bool(_PROCESS_PATTERNS.search(output[-4096:])))
        if process_limit and not lost:
            self.kill_commands()
        return CommandOutcome(output, code, timed_out, exceeded, out_of_memory, process_limit, lost,
                              stragglers)

    def _counters(self) -> tuple[int, int]:
        if self.cgroup is None:
            return (0, 0)
        return self.cgroup.oom_kills(), self.cgroup.pids_limit_hits()

    # ---------------------------------------------------------------- killing
    def _end_stragglers(self) -> int:
        """A command's processes do not outlive it: what it left running in the background
        (a daemon, a fork bomb) is killed when it returns. Cheap with a cgroup (its process
        list names the few candidates); without one this would scan every process of the host,
        so it is skipped and RLIMIT_NPROC bounds what is left."""
        if self.cgroup is None:
            return 0
        return self.kill_commands()

    def kill_commands(self) -> int:
        """SIGKILL every process in the sandbox except its init (pid 1) and the shell, until
        none is left (fork bombs included: the process cap bounds each round). Returns how many
        processes were killed."""
        killed: set[int] = set()
        for _ in range(200):
            victims = [host for host, inner in self._sandbox_processes()
                       if inner not in (1, self.inner_pid)]
            if not victims:
                break
            killed.update(victims)
            for pid in victims:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    continue
            time.sleep(0.002)
        return len(killed)

    def _sandbox_processes(self) -> list[tuple[int, int]]:
        """``(host pid, pid inside the sandbox)`` of the sandbox's live processes."""
        ns = self._sandbox_pidns()
        if ns is None:
            return []
        candidates = self.cgroup.pids() if self.cgroup else [
            int(p) for p in os.listdir("/proc") if p.isdigit()]
        found = []
        for pid in candidates:
            try:
                if os.readlink(f"/proc/{pid}/ns/pid") != ns:
                    continue
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            if "\nState:\tZ" in status:
                continue
            nspid = next((ln.split()[1:] for ln in status.splitlines() if ln.startswith("NSpid:")), [])
            if len(nspid) >= 2:
                found.append((pid, int(nspid[-1])))
        return found

    def _sandbox_pidns(self) -> str | None:
        if self._pidns is None:
            outer = self.proc.pid
            for p in os.listdir("/proc"):
                if not p.isdigit():
                    continue
                try:
                    stat = Path(f"/proc/{p}/stat").read_text()
                    ppid = int(stat.rsplit(")", 1)[1].split()[1])
                    if ppid == outer:
                        self._pidns = os.readlink(f"/proc/{p}/ns/pid")
                        break
                except (OSError, ValueError, IndexError):
                    continue
        return self._pidns

    def kill(self) -> None:
        """End the whole sandbox: its pid namespace dies with its init."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            if f is not None:
                f.close()

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    # -------------------------------------------------------------------- I/O
    def _write(self, data: bytes) -> bool:
        view = memoryview(data)
        try:
            while view:
                n = os.write(self._in, view)
                view = view[n:]
        except (BrokenPipeError, OSError):
            return False
        return True

    def _drain(self) -> None:
        """Drop output that killed background processes left in the pipe."""
        try:
            while os.read(self._out, 1 << 16):
                pass
        except (BlockingIOError, OSError):
            return

    def _read(self, deadline: float) -> bytes | None:
        """Next chunk of output; ``b""`` at end of file, ``None`` once ``deadline`` passes."""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            if not self._poll.poll(remaining * 1000):
                continue
            try:
                return os.read(self._out, 1 << 16)
            except BlockingIOError:
                continue
