"""The OpenAI Agents SDK session over fermix memory beside the SDK's own ``agents.SQLiteSession``.

Both sessions keep a file on the same disk and are driven the way ``Runner`` drives a session,
one after the other in the same run, through the same event loop:

* ``get_items(limit=20)`` on a session of 1,000 and of 10,000 items (what a run with
  ``SessionSettings(limit=20)`` reads at each turn): the median call, ours ÷ the SDK's, and how
  ours grows with the session (``ours_10k ÷ ours_1k``, which should stay near 1);
* ``add_items`` of a turn's four items (the user's message, a tool call, its output, the
  assistant's reply), the median items per second over slices that take turns, ours ÷ the SDK's;
* ``get_items()`` of the whole 10,000-item session, ours ÷ the SDK's;
* ``pop_item()`` on that session afterwards (time, ours ÷ the SDK's; no target in the issue: a
  pop reads the window's end, not the conversation's whole stream, ADR-0105).

Ours runs without the review an assistant reply would queue (``review=False``): the figures are
what recording and reading cost, which is all the SDK's session does. Each store keeps its own
durability as shipped (ours: ``normal``; the SDK's: SQLite's ``synchronous = FULL``). Every figure
is given by the process's CPU time too (``cpu_*``), which other processes on a shared machine
move far less than wall-clock time; what ours does in the background after its writes (its
search index, and since ADR-0085 the days and names each message speaks of, which an append on
SQLite leaves to that upkeep) is waited for, untimed, before the other side's turn, so that it
lands in no figure of the SDK's: the ``add_items`` figures count no parsing of marks, which runs
in the pause after a slice (the same CPU, off the turn's path).

Run from the repository root (or through ``benchmarks/peers.py``)::

    .venv/bin/python benchmarks/peers_agents.py [--quick]

The last line of stdout is one JSON object of the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("FERMIX_RECALL_BY_MEANING", "false")  # storage figures: no model

LIMIT = 20
WARM_UP = 8  # untimed calls of each side before a read is timed (each lane thread's first call opens its connection)
TURN = 4  # items a Runner turn records: the user's message, a tool call, its output, the reply
_ids = itertools.count(1)


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def turn_items() -> list[dict[str, Any]]:
    """One turn's items as ``Runner`` hands them to ``add_items`` (the model's with their ids)."""
    n = next(_ids)
    return [
        {"role": "user", "content": f"Question {n}: what is the weather in Paris on day {n % 31}?"},
        {"type": "function_call", "id": f"fc_{n}", "call_id": f"call_{n}", "name": "weather",
         "arguments": json.dumps({"city": "Paris", "day": n % 31}), "status": "completed"},
        {"type": "function_call_output", "call_id": f"call_{n}", "output": f"Sunny, {10 + n % 20} degrees"},
        {"id": f"msg_{n}", "type": "message", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": f"It will be sunny in Paris on day {n % 31}.",
                      "annotations": [], "logprobs": []}]},
    ]


class Sides:
    """Ours and the SDK's session of each name, on one memory home and one SDK database."""

    def __init__(self, workdir: Path) -> None:
        from agents import SQLiteSession

        from fermix_memory import MemorySystem
        from fermix_memory.openai_agents import FermixAgentsSession

        self.memory = MemorySystem.open(workdir / "home", config={})
        self._ours = lambda name: FermixAgentsSession.open(self.memory, name, agent_id="ada", owner_id="alice",
                                                            review=False)
        self._peer = lambda name: SQLiteSession(name, db_path=workdir / "agents.db")
        self.sessions: dict[tuple[str, str], Any] = {}

    def get(self, side: str, name: str) -> Any:
        key = (side, name)
        if key not in self.sessions:
            self.sessions[key] = (self._ours if side == "ours" else self._peer)(name)
        return self.sessions[key]

    def close(self) -> None:
        for (side, _), session in self.sessions.items():
            if side == "peer":
                session.close()
        self.memory.close()


def fill(loop: asyncio.AbstractEventLoop, sides: Sides, name: str, count: int) -> None:
    """``count`` items into session ``name`` of both sides (the same items), 25 turns a call."""
    items = [item for _ in range(-(-count // TURN)) for item in turn_items()][:count]
    for side in ("ours", "peer"):
        session = sides.get(side, name)
        for start in range(0, count, 25 * TURN):
            loop.run_until_complete(session.add_items(items[start:start + 25 * TURN]))
        progress(f"  {side}: {name} holds {count} items")


def timed_calls(loop: asyncio.AbstractEventLoop, call: Callable[[], Awaitable[object]], budget_s: float,
                most: int) -> list[tuple[float, float]]:
    """Seconds per call of ``call`` (wall clock, and the process's CPU time), called until
    ``budget_s`` is spent (at least 3 calls, at most ``most``)."""
    samples: list[tuple[float, float]] = []
    spent = 0.0
    while len(samples) < most and (spent < budget_s or len(samples) < 3):
        t, c = time.perf_counter(), time.process_time()
        loop.run_until_complete(call())
        samples.append((time.perf_counter() - t, time.process_time() - c))
        spent += samples[-1][0]
    return samples


def side_by_side(loop: asyncio.AbstractEventLoop, calls: dict[str, Callable[[], Awaitable[object]]],
                 rounds: int, budget_s: float, most: int) -> dict[str, tuple[float, float]]:
    """Each side's median seconds per call, wall clock and CPU time; the sides take turns, round
    by round, in both orders."""
    samples: dict[str, list[tuple[float, float]]] = {side: [] for side in calls}
    for r in range(rounds):
        for side in (list(calls) if r % 2 == 0 else list(calls)[::-1]):
            samples[side] += timed_calls(loop, calls[side], budget_s, most)
    return {side: (statistics.median(w for w, _ in times), statistics.median(c for _, c in times))
            for side, times in samples.items()}


def reads(loop: asyncio.AbstractEventLoop, sides: Sides, name: str, limit: int | None, rounds: int,
          budget_s: float) -> dict[str, tuple[float, float]]:
    ours, peer = sides.get("ours", name), sides.get("peer", name)
    got_ours, got_peer = (loop.run_until_complete(s.get_items(limit)) for s in (ours, peer))
    if got_ours != got_peer:
        raise SystemExit(f"the sessions disagree on get_items({limit}) of {name}")
    for _ in range(WARM_UP):  # each side's threads at their steady state (connections open, statements prepared)
        loop.run_until_complete(ours.get_items(limit))
        loop.run_until_complete(peer.get_items(limit))
    return side_by_side(loop, {"ours": lambda: ours.get_items(limit), "peer": lambda: peer.get_items(limit)},
                        rounds, budget_s, 200)


def throughput(loop: asyncio.AbstractEventLoop, sides: Sides, rounds: int, calls: int
               ) -> dict[str, tuple[float, float]]:
    """Items per second of ``add_items`` of one turn (4 items) a call, by wall clock and by the
    process's CPU time: the median over slices of ``calls`` calls, the sides taking turns."""
    rates: dict[str, list[tuple[float, float]]] = {"ours": [], "peer": []}
    for r in range(rounds):
        for side in (("ours", "peer") if r % 2 == 0 else ("peer", "ours")):
            session = sides.get(side, "throughput")
            batches = [turn_items() for _ in range(calls)]
            t, c = time.perf_counter(), time.process_time()
            for batch in batches:
                loop.run_until_complete(session.add_items(batch))
            rates[side].append((calls * TURN / (time.perf_counter() - t), calls * TURN / (time.process_time() - c)))
            sides.memory.wait_for_background()  # untimed: ours' index upkeep lands in no other slice
    return {side: (statistics.median(w for w, _ in r), statistics.median(c for _, c in r)) for side, r in rates.items()}


def figures(at_1k: Any, at_10k: Any, rate: Any, whole: Any, popped: Any) -> dict[str, Any]:
    """The JSON figures of the measured (wall, cpu) pairs; each ratio is ours ÷ the SDK's."""
    ms = lambda s: round(s * 1000, 3)  # noqa: E731
    out: dict[str, Any] = {}
    for clock, i in (("", 0), ("cpu_", 1)):
        out |= {
            f"{clock}get_items_limit20_1k_ms": {side: ms(t[i]) for side, t in at_1k.items()},
            f"{clock}get_items_limit20_10k_ms": {side: ms(t[i]) for side, t in at_10k.items()},
            f"{clock}get_items_limit20_1k_ratio": round(at_1k["ours"][i] / at_1k["peer"][i], 2),
            f"{clock}get_items_limit20_10k_ratio": round(at_10k["ours"][i] / at_10k["peer"][i], 2),
            f"{clock}get_items_limit20_ours_10k_to_1k": round(at_10k["ours"][i] / at_1k["ours"][i], 2),
            f"{clock}get_items_limit20_peer_10k_to_1k": round(at_10k["peer"][i] / at_1k["peer"][i], 2),
            f"{clock}add_items_items_per_s": {side: round(r[i]) for side, r in rate.items()},
            f"{clock}add_items_throughput_ratio": round(rate["ours"][i] / rate["peer"][i], 2),
            f"{clock}get_items_all_10k_ms": {side: ms(t[i]) for side, t in whole.items()},
            f"{clock}get_items_all_10k_ratio": round(whole["ours"][i] / whole["peer"][i], 2),
            f"{clock}pop_item_10k_ms": {side: ms(t[i]) for side, t in popped.items()},
            f"{clock}pop_item_10k_ratio": round(popped["ours"][i] / popped["peer"][i], 2),
        }
    return out


def run(quick: bool = False) -> dict[str, Any]:
    """Every figure of the module's docstring, measured in this run."""
    rounds, budget_s, calls = (3, 0.2, 60) if quick else (5, 0.5, 200)
    loop = asyncio.new_event_loop()
    with tempfile.TemporaryDirectory(prefix="fermix-peers-agents-") as tmp:
        sides = Sides(Path(tmp))
        try:
            progress("agents: filling sessions of 1,000 and 10,000 items")
            fill(loop, sides, "s1k", 1_000)
            fill(loop, sides, "s10k", 10_000)
            sides.memory.wait_for_background()
            progress("agents: get_items(limit=20)")
            at_1k = reads(loop, sides, "s1k", LIMIT, rounds, budget_s)
            at_10k = reads(loop, sides, "s10k", LIMIT, rounds, budget_s)
            progress("agents: add_items, one turn a call")
            rate = throughput(loop, sides, 2 * rounds + 1, calls)  # the peer's syncs swing: more slices
            progress("agents: get_items() of 10,000 items")
            whole = reads(loop, sides, "s10k", None, max(2, rounds - 2), budget_s)
            progress("agents: pop_item on the 10,000-item session")
            pops = {side: sides.get(side, "s10k").pop_item for side in ("ours", "peer")}
            popped = side_by_side(loop, pops, max(2, rounds - 2), budget_s, 200)
        finally:
            sides.close()
            loop.close()
    return {
        **figures(at_1k, at_10k, rate, whole, popped),
        "targets": {"get_items_limit20_10k_ratio": "<= 2", "get_items_limit20_ours_10k_to_1k": "~1",
                    "add_items_throughput_ratio": ">= 1", "get_items_all_10k_ratio": "<= 1"},
        "durability": {"ours": "normal (the default: WAL, no sync at each commit)",
                       "peer": "the SDK's: WAL, synchronous FULL (a sync at each commit)"},
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer rounds and calls (well under a minute)")
    args = p.parse_args(argv)
    print(json.dumps(run(args.quick)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
