"""A bounded thread pool for blocking runtime calls, answering straight into the event loop.

``loop.run_in_executor`` goes through ``concurrent.futures.Future``, whose lock both the worker
(setting the result) and the event loop (chaining it) take. When the worker loses the GIL while
holding it, the event loop stalls until the worker runs again (a convoy: up to the interpreter's
switch interval, 5 ms, per call). Here a worker hands its result to the loop with
``call_soon_threadsafe`` and the loop never waits on a lock a worker holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from proofgym.core.errors import ConfigError

T = TypeVar("T")


def _deliver(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if future.cancelled():
        return  # the awaiting episode was cancelled; the call still ran to completion
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


class RuntimeExecutor:
    """Runs ``fn(*args)`` on one of ``threads`` daemon threads; ``await run(fn, ...)`` gets the
    result (or the exception) on the event loop. Calls queue in order when all threads are busy."""

    def __init__(self, threads: int, *, name: str = "proofgym-runtime") -> None:
        if threads < 1:
            raise ConfigError("threads must be >= 1")
        self._calls: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True)
                         for i in range(threads)]
        for thread in self._threads:
            thread.start()

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._calls.put((loop, future, fn, args))
        return await future

    def _work(self) -> None:
        while True:
            item = self._calls.get()
            if item is None:
                return
            loop, future, fn, args = item
            try:
                result, ok = fn(*args), True
            except BaseException as exc:  # delivered to the awaiting coroutine, which decides
                result, ok = exc, False
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting any more
                loop.call_soon_threadsafe(_deliver, future, ok, result)

    def shutdown(self) -> None:
        """Stop the threads once queued calls are done (returns at once)."""
        for _ in self._threads:
            self._calls.put(None)
