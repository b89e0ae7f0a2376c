"""What asking the memory as of a moment costs, beside asking it now (ADR-0033).

Builds a log of many owners: conversation messages imported in batches, interleaved with rounds
of memory writes by every owner (adds, replaces, archives, each round one transaction per owner
with its prompt-file revisions), so an owner's memory stream is spread thinly over the whole
log. Then, for random owners and random moments of the history, it times:

- ``memories(agent_id, owner_id, as_of=moment)`` (a fold of the owner's memory stream) against
  ``memories(agent_id, owner_id)`` now (the projection);
- ``resource_as_of("user_md", moment)`` (a fold of the file's resource stream) against the
  current revision (``resource_revision``);
- ``compose_prompt(..., as_of=moment)`` against ``compose_prompt(...)`` now;
- and, a few times, a replay of the whole log stopped at the moment (every event read, the
  owner's rows folded): what the fold of one stream avoids.

Run (from the repository root)::

    .venv/bin/python benchmarks/as_of.py --quick    # about 100,000 events
    .venv/bin/python benchmarks/as_of.py            # about 1,000,000 events
    .venv/bin/python benchmarks/as_of.py --quick --store postgres   # on a PostgreSQL server started for the run

Progress goes to stderr; the LAST line of stdout is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root: tests.postgres_server
from fermix_memory import MemorySystem
from fermix_memory.application.as_of import fold_memories
from tests.postgres_server import missing_server, running_server

WORDS = ("tea", "coffee", "paris", "lyon", "chess", "piano", "running", "rust", "python", "opera", "maps",
         "boats", "cats", "dogs", "snow", "bread", "jazz", "soup", "bikes", "stars")
CATEGORIES = ("identity", "preference", "interest", "goal", "context")


def log(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def message_lines(n: int, owners: int, offset: int, rng: random.Random, t0: datetime) -> list[str]:
    lines = []
    for i in range(offset, offset + n):
        o = rng.randrange(owners)
        role = "user" if i % 2 == 0 else "assistant"
        owner = f"owner-{o:04d}"
        lines.append(json.dumps({
            "agent_id": "agent", "owner_id": owner, "channel": "telegram", "chat_id": f"chat-{o:04d}",
            "role": role, "sender": owner if role == "user" else "agent",
            "content": " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 30))),
            "created_at": (t0 + timedelta(seconds=i)).isoformat(),
        }))
    return lines


def write_round(memory: MemorySystem, owners: int, rnd: int, rng: random.Random, live: dict[int, list[int]]) -> int:
    """Every owner: two new rows, one replaced, one archived now and then; one transaction each."""
    events = 0
    for o in range(owners):
        owner, ids = f"owner-{o:04d}", live.setdefault(o, [])
        ops: list[dict[str, Any]] = [
            {"op": "add", "category": rng.choice(CATEGORIES), "key": f"k{rnd}_{j}",
             "value": f"likes {rng.choice(WORDS)} {rnd}"} for j in range(2)]
        if ids:
            ops.append({"op": "replace", "id": rng.choice(ids), "value": f"now {rng.choice(WORDS)} {rnd}"})
        if len(ids) > 4 and rnd % 3 == 0:
            ops.append({"op": "archive", "id": ids.pop(rng.randrange(len(ids)))})
        outcomes = memory.write_memory(ops, agent_id="agent", owner_id=owner, trust="operator")
        ids += [x.memory_id for x in outcomes[:2] if x.memory_id is not None]
        events += sum(1 for x in outcomes if x.status != "refused")
    return events


def build(home: Path, target_events: int, owners: int, rounds: int) -> dict[str, Any]:
    rng = random.Random(7)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    started = time.perf_counter()
    live: dict[int, list[int]] = {}
    with MemorySystem.open(home) as memory:
        memory_events = rounds * owners * 3  # about: the rows, then their prompt-file revisions
        messages = max(0, target_events - memory_events)
        per_round, sent = messages // rounds, 0
        for rnd in range(rounds):
            lines = message_lines(per_round, owners, sent, rng, t0)
            for start in range(0, len(lines), 25_000):
                memory.import_history(lines[start:start + 25_000])
            sent += len(lines)
            write_round(memory, owners, rnd, rng, live)
            log(f"round {rnd + 1}/{rounds}: {sent:,} messages, log at {memory.head().position:,}"
                f" ({time.perf_counter() - started:.0f} s)")
        position = memory.head().position
    return {"events": position, "messages": sent, "owners": owners, "rounds": rounds,
            "build_s": round(time.perf_counter() - started, 1)}


def timed(call: Callable[[], Any]) -> float:
    start = time.perf_counter()
    call()
    return (time.perf_counter() - start) * 1000


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


def measure(home: Path, owners: int, queries: int, replays: int) -> dict[str, Any]:
    rng = random.Random(11)
    with MemorySystem.open(home, readonly=True) as memory:
        first, last = _span(memory)
        figures: dict[str, list[float]] = {k: [] for k in (
            "rows_as_of", "rows_now", "file_as_of", "file_now", "prompt_as_of", "prompt_now")}
        stream_events = []
        for _ in range(queries):
            owner = f"owner-{rng.randrange(owners):04d}"
            moment = first + (last - first) * rng.random()
            who = {"agent_id": "agent", "owner_id": owner}
            conv = f"telegram:chat-{owner.removeprefix('owner-')}"
            figures["rows_as_of"].append(timed(lambda: memory.memories(**who, as_of=moment)))  # noqa: B023
            figures["rows_now"].append(timed(lambda: memory.memories(**who)))  # noqa: B023
            figures["file_as_of"].append(timed(lambda: memory.resource_as_of("user_md", moment, **who)))  # noqa: B023
            figures["file_now"].append(timed(lambda: memory.resources(**who)))  # noqa: B023
            figures["prompt_as_of"].append(timed(
                lambda: memory.compose_prompt("agent", owner, conv, as_of=moment)))  # noqa: B023
            figures["prompt_now"].append(timed(lambda: memory.compose_prompt("agent", owner, conv)))  # noqa: B023
            stream_events.append(len(memory.memories(**who)))
        replay_ms = []
        for _ in range(replays):
            owner = f"owner-{rng.randrange(owners):04d}"
            moment = first + (last - first) * rng.random()
            start = time.perf_counter()
            replayed = _replay_until(memory, owner, moment)
            replay_ms.append((time.perf_counter() - start) * 1000)
            assert replayed == memory.memories(agent_id="agent", owner_id=owner, as_of=moment)
    out: dict[str, Any] = {"queries": queries}
    for name, values in figures.items():
        out[f"{name}_p50_ms"], out[f"{name}_p95_ms"] = p(values, 0.5), p(values, 0.95)
    for what in ("rows", "file", "prompt"):
        out[f"{what}_p95_ratio"] = round(out[f"{what}_as_of_p95_ms"] / max(out[f"{what}_now_p95_ms"], 1e-6), 1)
    out["rows_per_owner_p50"] = int(statistics.median(stream_events))
    out["replay_until_moment_ms"] = [round(x, 1) for x in replay_ms]
    return out


def _span(memory: MemorySystem) -> tuple[datetime, datetime]:
    """The times of the first and the last memory row written (the moments asked about lie between)."""
    rows = memory.memories(agent_id="agent")
    return min(r.created_at for r in rows), max(r.updated_at for r in rows)


def _replay_until(memory: MemorySystem, owner: str, moment: datetime) -> list[Any]:
    """The yardstick: the whole log read from its start, stopped at the moment, the owner's rows folded."""
    stream = f"memory/agent/{owner}"
    mine = []
    for item in memory.events():  # the log itself: no projection
        if item.event.at > moment:
            break
        if item.stream == stream:
            mine.append(item)
    return sorted(fold_memories(mine).values(), key=lambda r: r.id)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="about how many events the log holds")
    parser.add_argument("--owners", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=20, help="rounds of memory writes, between message batches")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--replays", type=int, default=2, help="whole-log replays timed as the yardstick")
    parser.add_argument("--quick", action="store_true", help="about 100,000 events over 200 owners")
    parser.add_argument("--store", choices=("sqlite", "postgres"), default="sqlite",
                        help="postgres: a server started for the run, a database of its own")
    parser.add_argument("--workdir", type=Path, help="keep the home here (default: a temporary folder, removed)")
    args = parser.parse_args(argv)
    if args.quick:
        args.events, args.owners, args.rounds, args.queries = 100_000, 200, 10, 200
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="fermix-as-of-bench-"))
    try:
        home = workdir / "home"
        if args.store == "postgres":
            if missing := missing_server():
                log(f"as_of.py: {missing}")
                return 2
            with running_server() as server:
                os.environ["FERMIX_DATABASE_URL"] = server.fresh_database()
                built = build(home, args.events, args.owners, args.rounds)
                result = {"store": "postgres", **built, **measure(home, args.owners, args.queries, args.replays)}
        else:
            built = build(home, args.events, args.owners, args.rounds)
            result = {"store": "sqlite", **built, **measure(home, args.owners, args.queries, args.replays)}
        print(f"{result['events']:,} events, {args.owners} owners: rows as of a moment p50"
              f" {result['rows_as_of_p50_ms']} ms / p95 {result['rows_as_of_p95_ms']} ms (now: p95"
              f" {result['rows_now_p95_ms']} ms); USER.md as of p95 {result['file_as_of_p95_ms']} ms; prompt as of"
              f" p95 {result['prompt_as_of_p95_ms']} ms (now {result['prompt_now_p95_ms']} ms); a replay stopped at"
              f" the moment: {result['replay_until_moment_ms']} ms")
        print(json.dumps(result))
        return 0
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("FERMIX_RECALL_BY_MEANING", "false")  # meaning only where asked for (ADR-0044)
    raise SystemExit(main())
