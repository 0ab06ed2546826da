"""The host side of a sandbox's control channel: requests to its trusted supervisor.

The sandbox's pid 1 is the supervisor program (``proofgym/programs/supervisor.py``); this process
talks to it over the sandbox's stdin and stdout, which no agent process holds. Each ``bash`` call is a fresh
``bash -c`` in the sandbox whose output, exit status (from ``waitpid``) and flags the supervisor
reports; the file tools are done by the supervisor itself. So nothing the agent's commands do
(redefining ``builtin``/``printf``/traps, closing or exhausting descriptors) changes what is
reported for a call or the next one. The working directory and exported variables carry over
between calls as data the supervisor keeps (parsed, never run as code).
"""

from __future__ import annotations

import contextlib
import marshal
import os
import select
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from proofgym.runtimes import program_files
from proofgym.runtimes.sandbox.cgroups import SandboxCgroup
from proofgym.runtimes.sandbox.system import SandboxSetupError

#: How long past a command's own time limit the supervisor may take to report (it kills and
#: reaps first); past it the sandbox is taken as lost and killed.
_GRACE_S = 5.0
_MAGIC = program_files.constant("supervisor", "MAGIC", bytes)


#: The sandbox's pid 1: the sandbox's interpreter, reading the supervisor's compiled code from
#: the channel first (:func:`supervisor_source`), so its command line stays short and it does
#: not compile 600 lines at every start (the sandbox runs the host's interpreter, so the
#: ``marshal`` format matches).
SUPERVISOR_COMMAND = ("/opt/python/bin/python3", "-I", "-S", "-c",
                      "import os, marshal\nn = int(os.read(0, 8))\ns = b''\nwhile len(s) < n:\n"
                      "    s += os.read(0, n - len(s)) or os._exit(1)\nexec(marshal.loads(s))")
#: On an image whose interpreter is not the host's (another ``marshal`` format), the source.
_SOURCE_LOADER = SUPERVISOR_COMMAND[4].replace("exec(marshal.loads(s))",
                                               "exec(compile(s, 'supervisor.py', 'exec'))")


def supervisor_command(python: str = SUPERVISOR_COMMAND[0], *, source: bool = False) -> list[str]:
    """The sandbox's pid 1 run by ``python``; ``source``: it reads the supervisor's source,
    not its code object (an interpreter other than the host's)."""
    return [python, *SUPERVISOR_COMMAND[1:4], _SOURCE_LOADER if source else SUPERVISOR_COMMAND[4]]


@cache
def supervisor_source(source: bool = False) -> bytes:
    """What the host writes first to a sandbox started with :func:`supervisor_command`: the
    length, then the supervisor's code object (or, with ``source``, its source)."""
    text = program_files.source("supervisor")
    code = text if source else marshal.dumps(compile(text, "supervisor.py", "exec"))
    return b"%08d" % len(code) + code


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


def _alive(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat.rsplit(b")", 1)[-1].split()[:1] != [b"Z"]


@dataclass(frozen=True)
class CommandOutcome:
    """What one command did. ``exit_code`` is ``None`` when no status was read (timeout, output
    over the limit, lost sandbox); a command killed by a signal has ``128 + signal``."""

    output: bytes
    exit_code: int | None
    timed_out: bool = False
    output_exceeded: bool = False
    out_of_memory: bool = False
    process_limit: bool = False
    shell_lost: bool = False
    stragglers: int = 0  # processes still running when the command returned (they were killed)
    note: str | None = None  # something the supervisor had to do, worded for the agent


class SandboxShell:
    """The control channel of one running sandbox, started by :func:`bwrap.spawn` with
    :func:`supervisor_command` as its pid 1.

    Args:
        proc: The outer ``bwrap`` process; its stdin/stdout are the channel.
        cgroup: The sandbox's cgroup (OOM and process-limit counters), if any.
        max_output_bytes: Output one command may produce.
        max_frame_bytes: Largest reply accepted from the supervisor (a file read, an output).
    """

    def __init__(self, proc: subprocess.Popen[bytes], cgroup: SandboxCgroup | None,
                 max_output_bytes: int, *, max_frame_bytes: int = 16 << 20,
                 pidns: str | None = None, source: bool = False) -> None:
        self.proc = proc
        self.cgroup = cgroup
        self.max_output_bytes = max_output_bytes
        self.max_frame_bytes = max(max_frame_bytes, max_output_bytes + (1 << 16))
        assert proc.stdin is not None and proc.stdout is not None
        self._in = proc.stdin.fileno()
        self._out = proc.stdout.fileno()
        os.set_blocking(self._out, False)
        self._poll = select.poll()
        self._poll.register(self._out, select.POLLIN | select.POLLHUP | select.POLLERR)
        self._buf = bytearray()
        self._pidns = pidns
        self._lock = threading.Lock()
        if os.geteuid() == 0:  # the OOM killer never picks the supervisor (it needs root)
            init = self._init_pid()
            with contextlib.suppress(OSError):
                Path(f"/proc/{init}/oom_score_adj").write_text("-1000")
        self._send_raw(supervisor_source(source))
        # the counters only move while a command runs: each call's "after" is the next "before"
        self._last_counters = self._counters()
        self._counted = False

    # ------------------------------------------------------------------ start
    def wait_ready(self, timeout_s: float = 20.0) -> None:
        """Wait for the supervisor's greeting; a sandbox that fails to start raises with what
        bwrap or the interpreter printed."""
        deadline = time.monotonic() + timeout_s
        while len(self._buf) < len(_MAGIC):
            chunk = self._read(deadline)
            if not chunk:
                break
            self._buf += chunk
        if not self._buf.startswith(_MAGIC):
            text = bytes(self._buf)
            with contextlib.suppress(OSError):
                end = time.monotonic() + 1.0
                while (chunk := self._read(end)) and len(text) < 65536:
                    text += chunk
            self.kill()
            raise SandboxSetupError("the sandbox failed to start"
                                    f": {text.decode(errors='replace').strip() or 'no output'}")
        del self._buf[: len(_MAGIC)]
        if self._recv(deadline) is None:
            self.kill()
            raise SandboxSetupError("the sandbox's supervisor did not report ready")

    # --------------------------------------------------------------- requests
    def call(self, request: dict[str, Any], timeout_s: float) -> dict[str, Any] | None:
        """Send one request and wait for its reply; ``None`` (and the sandbox killed) when the
        supervisor is gone or does not answer within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        with self._lock:  # one request at a time on the channel, whatever the threads
            if not self._send(request):
                self.kill()
                return None
            reply = self._recv(deadline)
        if reply is None:
            self.kill()
        return reply

    def run(self, command: str, timeout_s: float) -> CommandOutcome:
        """Run ``command`` in a fresh ``bash -c`` (in the working directory and with the
        variables the previous call left)."""
        # a spare's counters were read when it booted, before the previous episode ran
        before = self._last_counters if self._counted else self._counters()
        self._counted = True
        reply = self.call({"op": "run", "cmd": command.encode("utf-8", "surrogateescape").replace(b"\0", b""),
                           "timeout": float(timeout_s), "max_out": self.max_output_bytes},
                          timeout_s + _GRACE_S)
        if reply is None:
            # a sandbox whose memory is full of files can wedge its own supervisor (no process
            # left to kill): say so, not only that it stopped answering
            after = self._last_counters = self._counters()
            return CommandOutcome(b"", None, timed_out=True, shell_lost=True,
                                  out_of_memory=after[0] > before[0] or after[2] > before[2])
        if "out" not in reply:  # the supervisor could not run it (its own limits were lowered)
            self.kill()
            return CommandOutcome(b"", None, shell_lost=True,
                                  note=f"the sandbox could not run the command ({reply.get('msg')})")
        status = reply["status"]
        code = None
        if status is not None:
            code = os.waitstatus_to_exitcode(status)
            if code < 0:
                code = 128 - code
        oom, pids, _ = self._last_counters = self._counters()
        out = reply["out"]
        # from counters only, never from what the command printed (without a cgroup there is
        # no counter: a fork bomb is then reported by the processes it left, or its exit code)
        process_limit = pids > before[1]
        return CommandOutcome(out, code, reply["timed_out"], reply["exceeded"], oom > before[0],
                              process_limit, False, reply["stragglers"], reply.get("note"))

    def quiesce(self, timeout_s: float = 10.0) -> bool:
        """Kill every process of the sandbox but the supervisor and wait until they are gone;
        ``False`` if the supervisor could not (the sandbox is then killed)."""
        reply = self.call({"op": "quiesce"}, timeout_s)
        return reply is not None and reply.get("others") == 0

    def kill_commands(self) -> None:
        """Kill every process of the sandbox but the supervisor (the name the persistent-shell
        design had; tests use it)."""
        self.quiesce()

    def _sandbox_processes(self) -> list[tuple[int, int]]:
        """``(host pid, pid inside the sandbox)`` of the sandbox's live processes (for tests and
        diagnostics: nothing of the control channel depends on it)."""
        if self._pidns is None:
            init = self._init_pid()
            try:
                self._pidns = os.readlink(f"/proc/{init}/ns/pid") if init else None
            except OSError:
                return []
        if self._pidns is None:
            return []
        candidates = self.cgroup.pids() if self.cgroup else [
            int(p) for p in os.listdir("/proc") if p.isdigit()]
        found = []
        for pid in candidates:
            try:
                if os.readlink(f"/proc/{pid}/ns/pid") != self._pidns:
                    continue
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            if "\nState:\tZ" in status:
                continue
            nspid = next((ln.split()[1:] for ln in status.splitlines() if ln.startswith("NSpid:")),
                         [])
            if len(nspid) >= 2:
                found.append((pid, int(nspid[-1])))
        return found

    def _counters(self) -> tuple[int, int, int]:
        if self.cgroup is None:
            return (0, 0, 0)
        return self.cgroup.oom_kills(), self.cgroup.pids_limit_hits(), self.cgroup.memory_limit_hits()

    # -------------------------------------------------------------- lifetime
    def kill(self) -> None:
        """End the whole sandbox and wait until none of its processes is left: its init (the
        supervisor) dies with bwrap, and the kernel lets an init finish exiting only once every
        other process of its pid namespace has."""
        init = self._init_pid() if self.proc.poll() is None else None
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            if f is not None and not f.closed:
                f.close()
        if init is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(init, signal.SIGKILL)  # --die-with-parent does it too; do not wait on it
            deadline = time.monotonic() + 5.0
            while _alive(init) and time.monotonic() < deadline:
                time.sleep(0.001)

    def _init_pid(self) -> int | None:
        """Host pid of the sandbox's init: the child of the outer bwrap process."""
        try:
            text = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text()
        except OSError:
            return None
        pids = [int(p) for p in text.split()]
        return pids[0] if pids else None

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None and not self.proc.stdin.closed  # type: ignore[union-attr]

    # -------------------------------------------------------------------- I/O
    def _send(self, obj: dict[str, Any]) -> bool:
        data = marshal.dumps(obj)
        return self._send_raw(len(data).to_bytes(4, "big") + data)

    def _send_raw(self, data: bytes) -> bool:
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._in, view):]
        except OSError:  # the supervisor is gone (EPIPE) or the channel closed
            return False
        return True

    def _recv(self, deadline: float) -> dict[str, Any] | None:
        while True:
            if len(self._buf) >= 4:
                size = int.from_bytes(self._buf[:4], "big")
                if size > self.max_frame_bytes:
                    return None  # not what the supervisor sends: take the channel as broken
                if len(self._buf) >= 4 + size:
                    frame = bytes(self._buf[4: 4 + size])
                    del self._buf[: 4 + size]
                    try:
                        reply = marshal.loads(frame)
                    except (EOFError, ValueError, TypeError):
                        return None
                    return reply if isinstance(reply, dict) else None
            try:
                chunk = self._read(deadline)
            except OSError:
                return None
            if not chunk:
                return None
            self._buf += chunk

    def _read(self, deadline: float) -> bytes | None:
        """Next chunk from the channel; ``b""`` at end of file, ``None`` once ``deadline`` passes."""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            if not self._poll.poll(remaining * 1000):
                continue
            try:
                return os.read(self._out, 1 << 20)
            except BlockingIOError:
                continue
