"""Handing finished episodes to a sink (a run's record store) in order, off the event loop."""

from __future__ import annotations

import asyncio
from typing import Any

from proofgym.record import Trajectory
from proofgym.rollout.runtime_executor import RuntimeExecutor


class OrderedWriter:
    """Hands trajectories to the sink in delivery order on one thread. Those delivered while a
    write is under way go together in the next call, to ``sink.write_many`` when the sink has
    it (a :class:`~proofgym.record.RunStore`: one fsync for the batch), so a durable sink does not
    cap a run at one fsync per episode. Each delivery learns whether its own record was written."""

    def __init__(self, sink: Any) -> None:
        self._sink = sink
        self._thread = RuntimeExecutor(1, name="proofgym-sink")
        self._queue: list[tuple[Trajectory, asyncio.Future[None]]] = []
        self._draining = False
        self._drainer: asyncio.Future[None] | None = None

    async def write(self, traj: Trajectory) -> None:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append((traj, done))
        if not self._draining:
            self._draining = True
            self._drainer = asyncio.ensure_future(self._drain())
        await done

    async def _drain(self) -> None:
        try:
            while self._queue:
                batch, self._queue = self._queue, []
                try:
                    failures = await self._thread.run(self._write, [t for t, _ in batch])
                except Exception as exc:  # handed to every waiting delivery
                    failures = [exc] * len(batch)
                for (_, done), failure in zip(batch, failures, strict=True):
                    if done.done():
                        continue
                    if failure is None:
                        done.set_result(None)
                    else:
                        done.set_exception(failure)
        finally:
            self._draining = False

    def _write(self, trajs: list[Trajectory]) -> list[BaseException | None]:
        many = getattr(self._sink, "write_many", None)
        if many is not None and len(trajs) > 1:
            try:
                many(trajs)
            except Exception as exc:  # no record of the batch counts as written
                return [exc] * len(trajs)
            return [None] * len(trajs)
        failures: list[BaseException | None] = []
        for traj in trajs:
            try:
                self._sink.write(traj)
                failures.append(None)
            except Exception as exc:  # this record's failure, handed to its delivery
                failures.append(exc)
        return failures

    def shutdown(self) -> None:
        self._thread.shutdown()
