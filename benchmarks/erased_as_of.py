"""What the erased rows of an as-of answer cost beside the rows themselves (ADR-0083).

One agent, two owners with the same number of memory rows: alice's rows of one category (one in
fifty) are erased by a retention run, bob's are all kept. For a moment before the run it times, per
owner, ``memories(as_of=moment)`` (the fold of the owner's memory stream, ADR-0033) and
``erased_memories(as_of=moment)`` (the stream's entries with redacted ones, the records on the
memory and owner streams, the receipts), and gives their ratio. For bob, with nothing erased,
``erased_memories`` reads the stream's entries only.

Run (from the repository root)::

    .venv/bin/python benchmarks/erased_as_of.py --quick    # 2,000 rows an owner
    .venv/bin/python benchmarks/erased_as_of.py            # 20,000 rows an owner

Progress goes to stderr; the LAST line of stdout is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from fermix_memory import MemorySystem

START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
BATCH = 200


class Clock:
    def __init__(self) -> None:
        self.t = START

    def now(self) -> datetime:
        return self.t


def _fill(memory: MemorySystem, clock: Clock, owner: str, rows: int) -> None:
    for start in range(0, rows, BATCH):
        clock.t += timedelta(seconds=1)
        operations = [{"op": "add", "category": "identity" if owner == "alice" and n % 50 == 0 else "preference",
                       "key": f"k{n}",
                       "value": f"value {n} of {owner}"} for n in range(start, min(rows, start + BATCH))]
        memory.write_memory(operations, agent_id="ada", owner_id=owner, trust="operator")


def _median_ms(call: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        call()
        times.append(time.perf_counter() - began)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2,000 rows an owner (else 20,000)")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    rows = 2_000 if args.quick else 20_000
    config = {"fermix_core": {"retention": {"check_every_s": 0, "policy": [
        {"name": "health", "after": "1d", "category": "identity"}]}}}
    clock = Clock()
    figures: dict[str, Any] = {"rows_an_owner": rows, "repeats": args.repeats}
    with tempfile.TemporaryDirectory() as folder, \
            MemorySystem.open(Path(folder) / "home", clock=clock, config=config) as memory:
        print(f"writing {rows} rows for each of two owners", file=sys.stderr)
        for owner in ("alice", "bob"):
            _fill(memory, clock, owner, rows)
        moment = clock.t
        clock.t += timedelta(days=2)
        began = time.perf_counter()
        report = memory.run_retention()
        figures["retention_run_s"] = round(time.perf_counter() - began, 3)
        figures["erased_rows"] = len(report.items)
        for owner in ("alice", "bob"):
            pair = {"agent_id": "ada", "owner_id": owner, "as_of": moment}
            kept = len(memory.memories(**pair))
            erased = len(memory.erased_memories(**pair))
            for round_ in range(3):  # in-run ratios, repeated: the machine is shared
                rows_ms = _median_ms(lambda p=pair: memory.memories(**p), args.repeats)
                erased_ms = _median_ms(lambda p=pair: memory.erased_memories(**p), args.repeats)
                figures[f"{owner}_{round_}"] = {"rows": kept, "erased": erased, "memories_ms": round(rows_ms, 2),
                                                "erased_memories_ms": round(erased_ms, 2),
                                                "ratio": round(erased_ms / rows_ms, 3)}
                print(f"{owner} round {round_}: {figures[f'{owner}_{round_}']}", file=sys.stderr)
    print(json.dumps(figures, sort_keys=True))


if __name__ == "__main__":
    main()
