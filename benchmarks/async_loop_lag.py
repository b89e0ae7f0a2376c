"""How late an event loop's timers run while tasks append through the asyncio API (ADR-0026).

A ticker task asks to wake every millisecond and records how late each wake-up is. It runs in
three settings, taking turns round by round on the same machine:

- ``idle``: the ticker alone (the loop's own jitter: the floor);
- ``lane``: 8 tasks appending through ``AsyncMemorySystem`` sessions as fast as they can (the
  calls run on the worker lane);
- ``blocking``: 8 tasks calling the SYNC API straight from the loop (what a host without the
  asyncio API would do; every append stalls the loop for its whole duration).

Run from the repository root::

    .venv/bin/python benchmarks/async_loop_lag.py --quick   # 1 s per setting and round
    .venv/bin/python benchmarks/async_loop_lag.py           # 3 s per setting, 3 rounds

Progress goes to stderr; the last line of stdout is one JSON object of the figures
(milliseconds, and messages per second for the appending settings).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

from fermix_memory import AsyncMemorySystem, AsyncSession

TICK_S = 0.001
TASKS = 8
AGENT = "ada"


async def ticker(stop: asyncio.Event, lateness_ms: list[float]) -> None:
    """Wake every TICK_S; record how late each wake-up came."""
    loop = asyncio.get_running_loop()
    due = loop.time() + TICK_S
    while not stop.is_set():
        await asyncio.sleep(max(0.0, due - loop.time()))
        now = loop.time()
        lateness_ms.append((now - due) * 1000)
        due = now + TICK_S


Appender = Callable[[AsyncSession, str], Awaitable[object]]


async def through_the_lane(s: AsyncSession, text: str) -> object:
    return await s.append("user", text)


async def blocking_the_loop(s: AsyncSession, text: str) -> object:
    return s.sync.append("user", text)  # the sync API called from the loop: what not to do


async def one_setting(memory: AsyncMemorySystem, seconds: float, append: Appender | None,
                      tag: str) -> tuple[list[float], int]:
    """The ticker's lateness samples, and how many messages were appended meanwhile."""
    stop = asyncio.Event()
    lateness: list[float] = []
    written = [0]

    async def writer(n: int) -> None:
        s = memory.session(agent_id=AGENT, owner_id=f"owner-{n}", conversation=f"bench:{tag}-{n}")
        while not stop.is_set():
            assert append is not None
            await append(s, f"message {written[0]} from task {n}: the harbour, the tides and the boats")
            written[0] += 1
            await asyncio.sleep(0)  # a task that never yields is a host bug, not the API's

    tasks = [asyncio.ensure_future(ticker(stop, lateness))]
    if append is not None:
        tasks += [asyncio.ensure_future(writer(n)) for n in range(TASKS)]
    await asyncio.sleep(seconds)
    stop.set()
    await asyncio.gather(*tasks)
    return lateness, written[0]


def quantiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered), 3),
        "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 3),
        "max_ms": round(ordered[-1], 3),
    }


async def measure(home: Path, seconds: float, rounds: int) -> dict[str, object]:
    settings: dict[str, Appender | None] = {"idle": None, "lane": through_the_lane, "blocking": blocking_the_loop}
    lateness: dict[str, list[float]] = {name: [] for name in settings}
    written = dict.fromkeys(settings, 0)
    async with AsyncMemorySystem.open(home) as memory:
        for round_ in range(rounds):
            for name, append in settings.items():
                samples, count = await one_setting(memory, seconds, append, f"{name}{round_}")
                lateness[name] += samples
                written[name] += count
                print(f"round {round_ + 1}/{rounds} {name:8s} {len(samples):6d} ticks"
                      f"  p99 {quantiles(samples)['p99_ms']:.3f} ms  {count} messages", file=sys.stderr)
        verified = (await memory.verify()).ok
    figures: dict[str, object] = {"tick_ms": TICK_S * 1000, "tasks": TASKS, "seconds": seconds, "rounds": rounds,
                                  "switch_interval_ms": sys.getswitchinterval() * 1000}
    for name in settings:
        for key, value in quantiles(lateness[name]).items():
            figures[f"{name}_lag_{key}"] = value
        figures[f"{name}_ticks"] = len(lateness[name])
        if settings[name] is not None:
            figures[f"{name}_msg_per_s"] = round(written[name] / (seconds * rounds))
    figures["verify_ok"] = verified
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="1 s per setting, 1 round")
    parser.add_argument("--seconds", type=float, default=3.0, help="length of each setting in each round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--switch-interval", type=float, default=None,
                        help="sys.setswitchinterval for the run, in seconds (CPython's default: 0.005)")
    args = parser.parse_args(argv)
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval)
    seconds, rounds = (1.0, 1) if args.quick else (args.seconds, args.rounds)
    with tempfile.TemporaryDirectory(prefix="fermix-loop-lag-") as home:
        figures = asyncio.run(measure(Path(home), seconds, rounds))
    print(f"{'setting':10s} {'p50':>9s} {'p99':>9s} {'max':>9s}  messages/s")
    for name in ("idle", "lane", "blocking"):
        rate = figures.get(f"{name}_msg_per_s", "")
        print(f"{name:10s} {figures[f'{name}_lag_p50_ms']:>6.3f} ms {figures[f'{name}_lag_p99_ms']:>6.3f} ms"
              f" {figures[f'{name}_lag_max_ms']:>6.3f} ms  {rate}")
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("FERMIX_RECALL_BY_MEANING", "false")  # meaning only where asked for (ADR-0044)
    sys.exit(main())
