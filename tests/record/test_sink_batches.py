"""Per-episode records: a durable sink is not held to one fsync per episode, and order and
exactly-once delivery are kept."""

from __future__ import annotations

import asyncio
import os
import time

import orjson
import pytest

from proofgym.eval import evaluate, make_env, plan_episodes
from proofgym.record import Trajectory
from proofgym.rollout import Orchestrator, ReferencePolicy
from proofgym.rollout.orchestrator import RolloutError
from proofgym.verify.pool import VerifierPool


def test_records_written_during_an_fsync_share_the_next_one(tmp_path, monkeypatch) -> None:
    real_fsync, synced = os.fsync, []

    def slow_fsync(fd: int) -> None:  # a slow disk: episodes finish while a record is synced
        if os.readlink(f"/proc/self/fd/{fd}").endswith("trajectories.jsonl"):
            synced.append(fd)
            time.sleep(0.05)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", slow_fsync)
    with VerifierPool("inline") as pool:
        _, summary = evaluate("proofgym/Guess-v0", ReferencePolicy(), episodes=40, concurrency=8,
                              verifier=pool, out=tmp_path / "run")
    records = [orjson.loads(x) for x in (tmp_path / "run" / "trajectories.jsonl").read_bytes().splitlines()]
    assert summary["episodes"] == 40 and len(records) == 40
    assert len({r["trajectory_id"] for r in records}) == 40
    assert 1 <= len(synced) < 40  # batches shared fsyncs


class ManySink:
    """A sink with write_many whose second batch fails: every episode of that batch fails."""

    def __init__(self) -> None:
        self.batches: list[int] = []

    def write(self, trajectory: Trajectory) -> None:
        self.write_many([trajectory])

    def write_many(self, trajectories: list[Trajectory]) -> None:
        time.sleep(0.05)
        if len(self.batches) == 1:
            raise OSError(28, "No space left on device")
        self.batches.append(len(trajectories))


def test_a_failed_batch_stops_the_run() -> None:
    env_id = "proofgym/Guess-v0"
    sink = ManySink()
    plan = plan_episodes(make_env(env_id).tasks.ids[:20])
    with VerifierPool("inline") as pool, pytest.raises(RolloutError, match="No space left"):
        asyncio.run(Orchestrator(lambda: make_env(env_id), ReferencePolicy(), concurrency=4,
                                 verifier=pool, inline_verification=False).run(plan, sink=sink))
    assert len(sink.batches) == 1  # the first batch; every one after it failed as a whole
