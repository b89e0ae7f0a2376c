"""What forgetting one owner costs, beside a bare ``VACUUM`` of the same database.

``forget_owner`` redacts the owner's events, deletes their rows, merges the FTS5 indexes,
rewrites the file (``VACUUM`` under ``secure_delete``) and truncates the WAL. The rewrite is
most of the cost, so the yardstick is the same rewrite alone: ``VACUUM`` on an identical copy of
the database, measured in the same run. Figures: seconds for each, their ratio, and the file
size before and after.

Run (from the repository root)::

    .venv/bin/python benchmarks/forget.py --quick     # 20,000 messages
    .venv/bin/python benchmarks/forget.py             # 100,000 messages over 40 owners

The LAST line of stdout is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

# The same synthetic history as the replay benchmark (run as a script, this folder is on the path).
from replay import history_lines

from fermix_memory import MemorySystem
from fermix_memory.adapters.sqlite.connection import open_connection


def vacuum_of_a_copy(home: Path, copy: Path) -> float:
    """Seconds a bare VACUUM (and WAL truncation) of a copy of ``home``'s memory.db takes: the
    yardstick of an erasure, which rewrites the file the same way."""
    shutil.copytree(home, copy)
    conn = open_connection(copy / "memory.db")
    start = time.perf_counter()
    conn.execute("VACUUM")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    seconds = time.perf_counter() - start
    conn.close()
    return seconds


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.messages = 20_000
    workdir = Path(tempfile.mkdtemp(prefix="fermix-forget-bench-"))
    try:
        home = workdir / "home"
        with MemorySystem.open(home) as memory:
            lines = history_lines(args.messages)
            for start in range(0, len(lines), 25_000):
                memory.import_history(lines[start:start + 25_000])
        size = (home / "memory.db").stat().st_size
        vacuum_s = vacuum_of_a_copy(home, workdir / "copy")

        with MemorySystem.open(home) as memory:
            start = time.perf_counter()
            report = memory.forget_owner("owner-07")
            forget_s = time.perf_counter() - start
            assert memory.verify().ok
        result = {
            "messages": args.messages, "owners": 40, "db_bytes": size,
            "forget_s": round(forget_s, 3), "vacuum_s": round(vacuum_s, 3),
            "forget_to_vacuum_ratio": round(forget_s / vacuum_s, 2),
            "erased_events": sum(report.erased_events.values()), "wal_truncated": report.wal_truncated,
            "bytes_before": report.bytes_before, "bytes_after": report.bytes_after,
        }
        print(f"forget one owner of 40 in {args.messages:,} messages ({size / 1e6:.0f} MB): {forget_s:.2f} s;"
              f" bare VACUUM of the same file {vacuum_s:.2f} s -> {forget_s / vacuum_s:.2f}x;"
              f" {result['erased_events']:,} events redacted")
        print(json.dumps(result))
        return 0
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("FERMIX_RECALL_BY_MEANING", "false")  # meaning only where asked for (ADR-0044)
    raise SystemExit(main())
