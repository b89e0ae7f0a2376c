"""Appends that never pause: the log caught up with in the background (ADR-0067) beside the
committing thread checkpointing it at the backstop (ADR-0046), in one run.

Each round opens a fresh home twice, one per way, alternating which goes first, and puts items
through the LangGraph store one after the other with no pause (the writer passes the backstop
many times). Per put: wall time (median, p99, max, how many took over 5 ms) and the process's
CPU time (both threads). Ratios are caught-up ÷ backstop (below 1: the catch-up is cheaper).

    .venv/bin/python benchmarks/wal_nonstop.py --quick

The last line of stdout is one JSON object (progress goes to stderr).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("FERMIX_RECALL_BY_MEANING", "false")  # storage figures: no model (ADR-0044)

from fermix_memory import MemorySystem
from fermix_memory.adapters.sqlite import wal_checkpoints
from fermix_memory.langgraph import FermixStore

WAYS = {"caught_up": wal_checkpoints.NONSTOP_PAGES, "backstop": 10**9}
SLOW_S = 0.005


def _puts(workdir: Path, nonstop: int, count: int) -> dict[str, float]:
    wal_checkpoints.NONSTOP_PAGES = nonstop  # read when the store opens
    with MemorySystem.open(workdir / "home") as memory:
        store = FermixStore(memory, agent_id="bench", default_owner="u1")
        for i in range(200):
            store.put(("memories",), f"warm-{i}", {"text": f"fact {i} likes tea", "n": i})
        memory.wait_for_background()
        times: list[float] = []
        wal = workdir / "home" / "memory.db-wal"
        cpu = time.process_time()
        for i in range(count):
            start = time.perf_counter()
            store.put(("memories",), f"key-{i}", {"text": f"fact {i} likes coffee", "n": i})
            times.append(time.perf_counter() - start)
        cpu = time.process_time() - cpu
        wal_bytes = wal.stat().st_size if wal.exists() else 0
    times.sort()
    return {"median_ms": statistics.median(times) * 1e3, "mean_ms": statistics.fmean(times) * 1e3,
            "p99_ms": times[int(len(times) * 0.99)] * 1e3, "max_ms": times[-1] * 1e3,
            "over_5ms": sum(t > SLOW_S for t in times), "cpu_ms": cpu / count * 1e3, "wal_pages": wal_bytes // 4120}


def run(quick: bool = False) -> dict[str, Any]:
    rounds, count = (3, 1_000) if quick else (5, 3_000)
    figures: dict[str, list[dict[str, float]]] = {way: [] for way in WAYS}
    for r in range(rounds):
        order = list(WAYS) if r % 2 == 0 else list(reversed(WAYS))
        for way in order:
            with tempfile.TemporaryDirectory(prefix="fermix-wal-nonstop-") as tmp:
                figures[way].append(f := _puts(Path(tmp), WAYS[way], count))
            print(f"round {r} {way:<9} " + " ".join(f"{k} {v:.3f}" for k, v in f.items()), file=sys.stderr, flush=True)
    medians = {way: {k: statistics.median(f[k] for f in runs) for k in runs[0]} for way, runs in figures.items()}
    ours, before = medians["caught_up"], medians["backstop"]
    return {"benchmark": "wal_nonstop", "quick": quick, "rounds": rounds, "puts": count, **{
        f"{way}_{k}": round(v, 3) for way, m in medians.items() for k, v in m.items()},
        **{f"{k}_ratio": round(ours[k] / before[k], 3) for k in ("mean_ms", "median_ms", "p99_ms", "max_ms", "cpu_ms")
           if before[k]}}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer rounds and puts")
    args = p.parse_args(argv)
    print(json.dumps(run(args.quick)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
