"""The lane's threads beside a plain ``ThreadPoolExecutor`` of as many threads (ADR-0100), in one run.

One task awaits one Agents ``add_items`` (a turn's four items) after another, as a Runner does;
the lane runs each call on one of its threads. The lane's threads are swapped slice by slice
between a ``ThreadPoolExecutor`` of :data:`~fermix_memory.entrypoints.api.lane.WORKERS` threads
(what the lane was) and :class:`~fermix_memory.entrypoints.api.lane_pool.LanePool` (what it is),
with the SDK's own ``SQLiteSession`` taking its turn beside them; each figure is the median slice.
Beside it, the empty hop: ``await`` of a call that returns at once, through each of the two and
through a one-thread executor (the floor: one thread, nothing to choose).

Run (from the repository root; needs the ``[openai-agents]`` extra)::

    .venv/bin/python benchmarks/lane_pool.py --quick

Progress goes to stderr; the LAST line of stdout is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from peers_agents import Sides, progress, turn_items

from fermix_memory.entrypoints.api import lane
from fermix_memory.entrypoints.api.lane_pool import LanePool


def _nothing() -> None:
    return None


def empty_hops(rounds: int, calls: int = 300) -> dict[str, float]:
    """Microseconds of one ``await`` of a call that returns at once, by pool (median round)."""
    loop = asyncio.new_event_loop()
    pools: dict[str, Any] = {"thread_pool_executor": ThreadPoolExecutor(lane.WORKERS), "lane_pool": LanePool(
        lane.WORKERS, "hop"), "one_thread_executor": ThreadPoolExecutor(1)}

    async def hop(pool: Any) -> None:
        await asyncio.wrap_future(pool.submit(_nothing))

    times: dict[str, list[float]] = {way: [] for way in pools}
    try:
        for r in range(rounds):
            for way in (list(pools) if r % 2 == 0 else list(pools)[::-1]):
                start = time.perf_counter()
                for _ in range(calls):
                    loop.run_until_complete(hop(pools[way]))
                times[way].append((time.perf_counter() - start) / calls)
    finally:
        loop.close()
    return {way: round(statistics.median(t) * 1e6, 1) for way, t in times.items()}


def run(rounds: int, calls: int) -> dict[str, Any]:
    loop = asyncio.new_event_loop()
    pools: dict[str, Any] = {"thread_pool_executor": ThreadPoolExecutor(lane.WORKERS, "plain"),
                             "lane_pool": LanePool(lane.WORKERS, "lane")}
    per_call: dict[str, list[float]] = {way: [] for way in ("peer", *pools)}
    shipped = lane._shared_pool()  # the lane's own threads, put back at the end
    with tempfile.TemporaryDirectory(prefix="fermix-lane-pool-") as tmp:
        sides = Sides(Path(tmp))
        try:
            ours, peer = sides.get("ours", "lane"), sides.get("peer", "lane")
            for _ in range(100):  # both sessions at their steady state
                items = turn_items()
                loop.run_until_complete(ours.add_items(items))
                loop.run_until_complete(peer.add_items(items))
            for r in range(rounds):
                for way in (list(per_call) if r % 2 == 0 else list(per_call)[::-1]):
                    session = peer if way == "peer" else ours
                    if way != "peer":
                        lane._pools[False] = pools[way]
                    batches = [turn_items() for _ in range(calls)]
                    start = time.perf_counter()
                    for batch in batches:
                        loop.run_until_complete(session.add_items(batch))
                    per_call[way].append((time.perf_counter() - start) / calls)
                    sides.memory.wait_for_background()  # untimed: our index upkeep lands in no slice
                progress(f"round {r + 1} of {rounds}")
        finally:
            lane._pools[False] = shipped
            sides.close()
            loop.close()
    median = {way: statistics.median(times) for way, times in per_call.items()}
    return {
        "benchmark": "lane_pool", "rounds": rounds, "calls_per_slice": calls,
        "add_items_ms": {way: round(t * 1000, 3) for way, t in median.items()},
        "lane_pool_to_thread_pool_executor_throughput": round(median["thread_pool_executor"] / median["lane_pool"], 2),
        "add_items_throughput_ratio_to_peer": {way: round(median["peer"] / median[way], 2) for way in pools},
        "empty_hop_us": empty_hops(2 * rounds),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    args = parser.parse_args(argv)
    figures = run(*((12, 30) if args.quick else (40, 30)))
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
