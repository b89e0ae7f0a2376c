"""``history import`` throughput side by side with a raw batched load of the same lines.

Every figure comes from THIS run on THIS machine. The same JSON Lines (SPEC §12; many agents,
owners and conversations, interleaved in time) are loaded in batches of ``--batch`` lines, so
that every batch after the first lands in conversations that already hold messages (as a
re-run or a file in several parts does):

* **ours** — ``MemorySystem.import_history(batch)`` per batch, on a fresh home: every line
  checked first, all or nothing, messages imported before skipped.
* **raw batched load** — the limit: plain apsw on a fresh ``memory.db`` with the product's
  schema and pragmas; per batch ``json.loads`` of each line, then ONE transaction inserting the
  chained ``events`` row and the ``messages`` row (FTS5 by the schema's triggers) of each line
  (``append_and_recall.RawLoop.append_batch``).

The two take turns round by round (order alternating); a figure is the median over rounds.
``import_ratio = ours / raw`` (target >= 0.8), from wall-clock time. The machine may be shared,
so the CPU time of the process during each load (``time.process_time``: every thread of it,
the import's background work included) is measured too: ``cpu_ratio = raw CPU / ours CPU``,
with the CPU microseconds per line of each.

Run (from the repository root)::

    .venv/bin/python benchmarks/history_import.py --messages 4000 --rounds 3

Progress goes to stderr; the LAST line of stdout is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import append_and_recall as aar


def lines_for(n: int) -> list[str]:
    corpus = aar.Corpus(aar.random.Random(aar.SEED))
    convs = aar.conversations_for(range(max(1, round(n / aar.MESSAGES_PER_AGENT))))
    return aar.history_lines(corpus, convs, aar.SEED + 10, aar.EPOCH)


def ours(home: Path, lines: Sequence[str], batch: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of importing ``lines`` into a fresh home."""
    with aar.open_memory(home) as memory:
        start, cpu = time.perf_counter(), time.process_time()
        for i in range(0, len(lines), batch):
            memory.import_history(lines[i:i + batch])
        return time.perf_counter() - start, time.process_time() - cpu


def raw(db: Path, lines: Sequence[str], batch: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of the raw batched load of ``lines``."""
    loop = aar.RawLoop.create(db)
    try:
        start, cpu = time.perf_counter(), time.process_time()
        for i in range(0, len(lines), batch):
            records = [json.loads(line) for line in lines[i:i + batch]]
            loop.append_batch([aar.Msg(r["agent_id"], r["owner_id"], r["channel"], r["chat_id"], r["role"],
                                       r["sender"], r["content"]) for r in records])
        return time.perf_counter() - start, time.process_time() - cpu
    finally:
        loop.conn.close()


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--messages", type=int, default=4000, help="lines to import (default 4000)")
    p.add_argument("--batch", type=int, default=1000, help="lines per import call (default 1000)")
    p.add_argument("--rounds", type=int, default=3, help="rounds, each on fresh databases")
    args = p.parse_args(argv)
    lines = lines_for(args.messages)
    times: dict[str, list[float]] = {"ours": [], "raw": []}
    cpus: dict[str, list[float]] = {"ours": [], "raw": []}
    base = Path(tempfile.mkdtemp(prefix="fermix-import-bench-"))
    try:
        for r in range(args.rounds):
            order = ("ours", "raw") if r % 2 == 0 else ("raw", "ours")
            for name in order:
                where = base / f"{name}-{r}"
                where.mkdir()
                load = ours(where, lines, args.batch) if name == "ours" else raw(where / "memory.db", lines, args.batch)
                t, cpu = load
                times[name].append(t)
                cpus[name].append(cpu)
                aar.progress(f"round {r + 1}: {name} {len(lines) / t:,.0f} msg/s, "
                             f"CPU {cpu / len(lines) * 1e6:.1f} us/line")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    rate = {name: len(lines) / statistics.median(ts) for name, ts in times.items()}
    out = {"messages": len(lines), "batch": args.batch, "rounds": args.rounds,
           "import_msgs_per_s": round(rate["ours"], 1), "raw_batched_load_msgs_per_s": round(rate["raw"], 1),
           "import_ratio": round(rate["ours"] / rate["raw"], 3), "import_target": 0.8}
    cpu_us = {name: statistics.median(c) / len(lines) * 1e6 for name, c in cpus.items()}
    out.update({"import_cpu_us_per_line": round(cpu_us["ours"], 1), "raw_cpu_us_per_line": round(cpu_us["raw"], 1),
                "cpu_ratio": round(cpu_us["raw"] / cpu_us["ours"], 3),
                "cpu_ratios_per_round": [round(r / o, 3) for o, r in zip(cpus["ours"], cpus["raw"], strict=True)],
                "import_ratios_per_round": [round(r / o, 3) for o, r in zip(times["ours"], times["raw"], strict=True)]})
    print(f"history import {rate['ours']:,.0f} msg/s, raw batched load {rate['raw']:,.0f} msg/s, "
          f"ratio {out['import_ratio']:.3f} (target >= 0.8); CPU {cpu_us['ours']:.1f} vs {cpu_us['raw']:.1f} us/line, "
          f"ratio {out['cpu_ratio']:.3f}")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("FERMIX_RECALL_BY_MEANING", "false")  # meaning only where asked for (ADR-0044)
    sys.exit(main())
