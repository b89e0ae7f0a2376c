"""A retention run beside the operator erasing the same rows by hand (ADR-0080).

Two homes get the same rows: one agent, one owner, ``--rows`` memory rows of which one in ten is
of a category a retention policy erases after a day. In one home a retention run erases them (one
erase transaction: each owner's events read once for every due row); in the other, ``forget_memory``
erases the same rows one call each (a transaction, a scrub and a receipt each). Both end with the
same rows left; the ratio is the run's time over the calls' time.

Run (from the repository root)::

    .venv/bin/python benchmarks/retention_run.py --quick    # 1,000 rows
    .venv/bin/python benchmarks/retention_run.py            # 4,000 rows

Progress goes to stderr; the LAST line of stdout is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from fermix_memory import MemorySystem

START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
BATCH = 200
CONFIG = {"fermix_core": {"retention": {"check_every_s": 0, "policy": [
    {"name": "health", "after": "1d", "category": "identity"}]}}}


class Clock:
    def __init__(self) -> None:
        self.t = START

    def now(self) -> datetime:
        return self.t


def _fill(memory: MemorySystem, clock: Clock, rows: int) -> list[int]:
    """The rows, one in ten of category identity; the ids of those."""
    due = []
    for start in range(0, rows, BATCH):
        clock.t += timedelta(seconds=1)
        operations = [{"op": "add", "category": "identity" if n % 10 == 0 else "preference", "key": f"k{n}",
                       "value": f"value {n} of alice"} for n in range(start, min(rows, start + BATCH))]
        outcomes = memory.write_memory(operations, agent_id="ada", owner_id="alice", trust="operator")
        due += [o.memory_id for o, op in zip(outcomes, operations, strict=True) if op["category"] == "identity"]
    return due


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 rows (else 4,000)")
    args = parser.parse_args()
    rows = 1_000 if args.quick else 4_000
    figures: dict[str, Any] = {"rows": rows}
    with tempfile.TemporaryDirectory() as folder:
        clocks = {"run": Clock(), "by_hand": Clock()}
        with MemorySystem.open(Path(folder) / "run", clock=clocks["run"], config=CONFIG) as run, \
                MemorySystem.open(Path(folder) / "by_hand", clock=clocks["by_hand"], config=CONFIG) as by_hand:
            print(f"writing {rows} rows into each home", file=sys.stderr)
            due = _fill(run, clocks["run"], rows)
            assert _fill(by_hand, clocks["by_hand"], rows) == due
            for clock in clocks.values():
                clock.t += timedelta(days=2)
            began = time.perf_counter()
            report = run.run_retention()
            figures["retention_run_s"] = round(time.perf_counter() - began, 3)
            began = time.perf_counter()
            for memory_id in due:
                by_hand.forget_memory(memory_id)
            figures["forget_memory_calls_s"] = round(time.perf_counter() - began, 3)
            figures["erased_rows"] = len(report.items)
            assert len(report.items) == len(due)
            assert len(run.memories(agent_id="ada", owner_id="alice")) == \
                len(by_hand.memories(agent_id="ada", owner_id="alice")) == rows - len(due)
    figures["ratio_run_over_calls"] = round(figures["retention_run_s"] / figures["forget_memory_calls_s"], 3)
    print(json.dumps(figures, sort_keys=True))


if __name__ == "__main__":
    main()
