"""Many concurrent Arith sessions against ``proofgym serve``, over OpenEnv's WebSocket messages.

``python -m tests.serve.load_client URL SESSIONS EPISODES`` plays EPISODES episodes (reset, a
calculator call, an answer) in each of SESSIONS sessions at once and prints one JSON line of
counts and step latencies; with EPISODES 0 it opens the sessions, resets each, prints ``ready``
and waits to be killed (the leak test).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from websockets.asyncio.client import connect


async def _ask(ws, message: dict) -> dict:
    await ws.send(json.dumps(message))
    return json.loads(await ws.recv())


async def session(url: str, index: int, episodes: int, latencies: list[float], counts: dict) -> None:
    async with connect(f"{url}/ws", max_size=None, open_timeout=120) as ws:
        for episode in range(max(episodes, 1)):
            reply = await _ask(ws, {"type": "reset", "data": {"seed": index * 1000 + episode}})
            if reply["type"] != "observation":
                counts["errors"] += 1
                return
            if episodes == 0:
                counts["ready"] += 1
                await asyncio.sleep(3600)
            call = {"tool_name": "calculator", "tool_input": {"expression": f"{index}+{episode}"}}
            for action in (call, {"message": f"\\boxed{{{index + episode}}}"}):
                started = time.perf_counter()
                reply = await _ask(ws, {"type": "step", "data": action})
                latencies.append(time.perf_counter() - started)
                if reply["type"] != "observation":
                    counts["errors"] += 1
                    return
            counts["episodes"] += 1
            counts["graded"] += reply["data"].get("verdict", {}).get("status") == "scored"
        await ws.send(json.dumps({"type": "close"}))


async def main(url: str, sessions: int, episodes: int) -> None:
    latencies: list[float] = []
    counts = {"episodes": 0, "graded": 0, "errors": 0, "ready": 0}
    tasks = [asyncio.create_task(session(url, i, episodes, latencies, counts)) for i in range(sessions)]
    if episodes == 0:
        while counts["ready"] + counts["errors"] < sessions:
            await asyncio.sleep(0.05)
        print("ready", json.dumps(counts), flush=True)
    started = time.perf_counter()
    await asyncio.gather(*tasks)
    ordered = sorted(latencies)

    def pick(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else -1.0

    print(json.dumps({**counts, "wall_s": time.perf_counter() - started, "steps": len(ordered),
                      "p50_ms": pick(0.5), "p99_ms": pick(0.99)}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
