"""The lane (ADR-0100, ADR-0101) beside a plain ``ThreadPoolExecutor`` of as many threads, in one run.

One task awaits one Agents ``add_items`` (a turn's four items) after another, as a Runner does;
the lane runs each call on one of its threads. The session's hop is swapped slice by slice between
``await wrap_future(executor.submit(...))`` on a ``ThreadPoolExecutor`` of
:data:`~fermix_memory.entrypoints.api.lane.WORKERS` threads (what the lane was before ADR-0100,
and what ``asyncio.to_thread`` does), the lane (``run_sync``) and the session as shipped, which
commits a turn at once on the loop's thread when it can (``run_write``, ADR-0110), with the SDK's
own ``SQLiteSession`` taking its turn beside them; each figure is the median slice.

Beside it, the empty hop: ``await`` of a call that returns at once, through the lane, through
``asyncio.to_thread``, and through the executors of four threads and of one (``wrap_future``).
A hop costs what the software does plus how long the OS takes to wake a thread on another core,
which on a virtual machine with idle cores is tens of microseconds and changes with where the
threads happen to run; so the empty hops are measured twice: in this process, and in a child
process held to one core (``--hops``), where only the software's part is left.

Run (from the repository root; needs the ``[openai-agents]`` extra)::

    .venv/bin/python benchmarks/lane_pool.py --quick

Progress goes to stderr; the LAST line of stdout is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from peers_agents import Sides, progress, turn_items

from fermix_memory.entrypoints.api import lane
from fermix_memory.entrypoints.integrations import openai_agents

Hop = Callable[..., Awaitable[Any]]


def _nothing() -> None:
    return None


def executor_hop(executor: ThreadPoolExecutor) -> Hop:
    """A hop through ``executor``'s own future, wrapped for the loop."""
    async def hop(call: Callable[..., Any], /, *args: Any) -> Any:
        return await asyncio.wrap_future(executor.submit(call, *args))
    return hop


def empty_hops(rounds: int, calls: int = 300) -> dict[str, float]:
    """Microseconds of one ``await`` of a call that returns at once, by way (median round)."""
    loop = asyncio.new_event_loop()
    hops: dict[str, Hop] = {"lane": lane.run_sync, "to_thread": asyncio.to_thread,
                            "thread_pool_executor": executor_hop(ThreadPoolExecutor(lane.WORKERS)),
                            "one_thread_executor": executor_hop(ThreadPoolExecutor(1))}
    times: dict[str, list[float]] = {way: [] for way in hops}
    try:
        for way in hops:  # each way's threads started before any is timed
            loop.run_until_complete(hops[way](_nothing))
        for r in range(rounds):
            for way in (list(hops) if r % 2 == 0 else list(hops)[::-1]):
                start = time.perf_counter()
                for _ in range(calls):
                    loop.run_until_complete(hops[way](_nothing))
                times[way].append((time.perf_counter() - start) / calls)
    finally:
        loop.close()
    return {way: round(statistics.median(t) * 1e6, 1) for way, t in times.items()}


def empty_hops_on_one_core(rounds: int) -> dict[str, float] | None:
    """:func:`empty_hops` in a child process held to one core (None where the OS cannot hold one)."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    core = min(os.sched_getaffinity(0))
    done = subprocess.run([sys.executable, __file__, "--hops", str(rounds)], capture_output=True, text=True,
                          check=True, preexec_fn=lambda: os.sched_setaffinity(0, {core}))
    figures: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
    return figures


def always(hop: Hop) -> Callable[..., Awaitable[Any]]:
    """``run_write`` that always takes ``hop``, never the loop's own thread."""
    def write(here: bool, call: Callable[..., Any], *args: Any) -> Awaitable[Any]:
        return hop(call, *args)
    return write


def run(rounds: int, calls: int) -> dict[str, Any]:
    loop = asyncio.new_event_loop()
    hops: dict[str, Hop] = {"thread_pool_executor": executor_hop(ThreadPoolExecutor(lane.WORKERS, "plain")),
                            "lane": lane.run_sync}
    # The session as shipped commits a turn at once on the loop's thread when it can (ADR-0110):
    # "at_once"; the other ways make it hop every time.
    ways: dict[str, Callable[..., Awaitable[Any]]] = {way: always(hop) for way, hop in hops.items()}
    ways["at_once"] = lane.run_write
    per_call: dict[str, list[float]] = {way: [] for way in ("peer", *ways)}
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
                        openai_agents.run_write = ways[way]  # type: ignore[assignment]  # the session's way
                    batches = [turn_items() for _ in range(calls)]
                    start = time.perf_counter()
                    for batch in batches:
                        loop.run_until_complete(session.add_items(batch))
                    per_call[way].append((time.perf_counter() - start) / calls)
                    sides.memory.wait_for_background()  # untimed: our index upkeep lands in no slice
                progress(f"round {r + 1} of {rounds}")
        finally:
            openai_agents.run_write = lane.run_write
            sides.close()
            loop.close()
    median = {way: statistics.median(times) for way, times in per_call.items()}
    return {
        "benchmark": "lane_pool", "rounds": rounds, "calls_per_slice": calls,
        "add_items_ms": {way: round(t * 1000, 3) for way, t in median.items()},
        "lane_to_thread_pool_executor_throughput": round(median["thread_pool_executor"] / median["lane"], 2),
        "at_once_to_lane_throughput": round(median["lane"] / median["at_once"], 2),
        "add_items_throughput_ratio_to_peer": {way: round(median["peer"] / median[way], 2) for way in ways},
        "empty_hop_us": empty_hops(2 * rounds),
        "empty_hop_us_one_core": empty_hops_on_one_core(2 * rounds),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--hops", type=int, metavar="ROUNDS", help="only the empty hops, in this process")
    args = parser.parse_args(argv)
    if args.hops:
        print(json.dumps(empty_hops(args.hops)))
        return 0
    figures = run(*((12, 30) if args.quick else (40, 30)))
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
