"""A real ``proofgym serve`` subprocess on a loopback port, for the serving tests."""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_READY = re.compile(r"on http://([\d.]+):(\d+) ")


class Served:
    """``proofgym serve ENV ARGS`` running; ``url`` once it listens. A context manager that
    stops it (SIGTERM, then SIGKILL) and keeps its output in ``output``."""

    def __init__(self, env_id: str, *args: str, timeout_s: float = 60.0,
                 env: dict[str, str] | None = None) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1", **(env or {})}
        self.proc = subprocess.Popen([sys.executable, "-m", "proofgym", "serve", env_id, "--port", "0",
                                      *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     env=env, text=True, start_new_session=True)
        self.output = ""
        deadline = time.monotonic() + timeout_s
        while True:
            ready, _, _ = select.select([self.proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
            line = self.proc.stdout.readline() if ready else ""  # type: ignore[union-attr]
            self.output += line
            found = _READY.search(line)
            if found:
                self.host, self.port = found.group(1), int(found.group(2))
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"proofgym serve did not start:\n{self.output}")
        # the rest of its output is read as it comes: a full pipe would stall the server
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()
        self.url = f"http://{self.host}:{self.port}"
        self.ws_url = f"ws://{self.host}:{self.port}"

    def _drain(self) -> None:
        for line in self.proc.stdout:  # type: ignore[union-attr]
            self.output += line

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 30.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(10)
        return self.proc.returncode

    def __enter__(self) -> Served:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found
