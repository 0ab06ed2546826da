"""Daemon threads for calls that may have to be abandoned on a timeout.

Python cannot kill a thread. A caller that stops waiting for a call (``future.result(timeout=)``
ran out) leaves the call running on its thread; :class:`DaemonThreads` then simply starts
another thread for the next call when none is idle, so a hung call costs one thread, never the
caller, and (the threads being daemons) never holds up interpreter exit, unlike
``ThreadPoolExecutor``, whose threads the interpreter joins. A call that finishes, even late,
frees its thread for reuse.

Used by the in-process runtime's tool calls, rubric components and the ``inline`` verifier
backend.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import queue
import threading
import weakref
from collections.abc import Callable
from typing import Any

from proofgym.core.errors import PoolClosedError

_POOLS: weakref.WeakSet[DaemonThreads] = weakref.WeakSet()


class DaemonThreads:
    """Reusable daemon threads started on demand (see the module docstring).

    ``submit(fn, *args)`` returns a :class:`concurrent.futures.Future` with ``fn``'s result or
    exception. ``shutdown()`` ends idle threads at once and busy ones when their call returns.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._reset()
        _POOLS.add(self)

    def _reset(self) -> None:
        self._calls: queue.SimpleQueue[tuple[cf.Future[Any], Callable[..., Any], tuple[Any, ...]] | None] = (
            queue.SimpleQueue())
        self._idle = 0  # threads waiting for a call
        self._closed = False

    def submit(self, fn: Callable[..., Any], *args: Any) -> cf.Future[Any]:
        future: cf.Future[Any] = cf.Future()
        with self._lock:
            if self._closed:
                raise PoolClosedError(f"{self.name}: submit after shutdown")
            if self._idle:
                self._idle -= 1
            else:  # every thread is busy (or stuck): one more
                threading.Thread(target=self._work, name=self.name, daemon=True).start()
            self._calls.put((future, fn, args))
        return future

    @property
    def idle(self) -> int:
        """Threads waiting for a call."""
        return self._idle

    def _work(self) -> None:
        while True:
            item = self._calls.get()
            if item is None:
                return
            future, fn, args = item
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args))
                except BaseException as exc:  # handed to whoever waits on the future
                    future.set_exception(exc)
            del item, future, fn, args  # hold no references while idle
            with self._lock:
                if self._closed:
                    return
                self._idle += 1

    def shutdown(self) -> None:
        """No new calls; idle threads end now, busy ones after their call (if it ever returns)."""
        with self._lock:
            self._closed, idle, self._idle = True, self._idle, 0
            for _ in range(idle):
                self._calls.put(None)


def _after_fork_in_child() -> None:
    # A forked child has none of the parent's threads (and the lock may have been held by one).
    for pool in list(_POOLS):
        closed = pool._closed
        pool._lock = threading.Lock()
        pool._reset()
        pool._closed = closed


os.register_at_fork(after_in_child=_after_fork_in_child)
