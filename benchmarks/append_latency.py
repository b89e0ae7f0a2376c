"""Latency of each append in a chat's rhythm: bursts of a turn's messages, then a pause.

A host appends a turn's few messages, then waits for the next turn. Each append is timed, ours
(``append_message``) and, in the same run (one after the other, in both orders), the raw loop of
``append_and_recall.py`` (the same durable work in plain apsw, SQLite's automatic checkpoint
inside the commit that takes the log past 1,000 pages). Then the same without pauses, where
ours checkpoints as SQLite does (ADR-0046). Prints p50 / p99 / p99.9 / max in milliseconds, the
appends above 1 ms, and ours / raw for p50 and p99.

Run from the repository root::

    .venv/bin/python benchmarks/append_latency.py [--bursts N] [--burst M] [--pause-ms P]

The last line of stdout is one JSON object of the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import append_and_recall as aar

from fermix_memory import MemorySystem

os.environ.setdefault("FERMIX_RECALL_BY_MEANING", "false")  # appends only: no model


def figures(samples: Sequence[float]) -> dict[str, float]:
    ms = [s * 1000 for s in samples]
    return {"p50_ms": round(aar.percentile(ms, 50), 3), "p99_ms": round(aar.percentile(ms, 99), 3),
            "p999_ms": round(aar.percentile(ms, 99.9), 3), "max_ms": round(max(ms), 3),
            "over_1ms": sum(1 for x in ms if x > 1.0)}


def rhythm(messages: Sequence[aar.Msg], burst: int, pause_s: float,
           appenders: dict[str, Callable[[aar.Msg], object]]) -> dict[str, dict[str, float]]:
    """Each appender takes every burst, a pause after each; one appender after the other (the
    background work of one must not land in the other's bursts), in both orders, half the
    messages each time."""
    times: dict[str, list[float]] = {name: [] for name in appenders}
    names = list(appenders)
    half = len(messages) // 2
    for part, order in ((messages[:half], names), (messages[half:], names[::-1])):
        for name in order:
            append = appenders[name]
            for start in range(0, len(part), burst):
                for m in part[start:start + burst]:
                    t = time.perf_counter()
                    append(m)
                    times[name].append(time.perf_counter() - t)
                if pause_s:
                    time.sleep(pause_s)
    return {name: figures(samples) for name, samples in times.items()}


def run(workdir: Path, messages: Sequence[aar.Msg], burst: int, pause_s: float) -> dict[str, dict[str, float]]:
    tag = f"{burst}-{pause_s}"
    memory = MemorySystem.open(workdir / f"ours-{tag}")
    raw = aar.RawLoop.create(workdir / f"raw-{tag}.db")
    try:
        return rhythm(messages, burst, pause_s, {"ours": lambda m: aar.append_all(memory, (m,)), "raw": raw.append})
    finally:
        memory.close()
        raw.conn.close()


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bursts", type=int, default=400, help="turns (default 400)")
    p.add_argument("--burst", type=int, default=4, help="messages per turn (default 4)")
    p.add_argument("--pause-ms", type=float, default=40.0, help="pause after each turn (default 40 ms)")
    args = p.parse_args(argv)
    corpus = aar.Corpus(random.Random(aar.SEED))
    messages = aar.append_workload(corpus, args.bursts * args.burst, aar.SEED + 1)
    out: dict[str, object] = {"bursts": args.bursts, "burst": args.burst, "pause_ms": args.pause_ms}
    with tempfile.TemporaryDirectory(prefix="fermix-latency-") as tmp:
        for label, pause in (("rhythm", args.pause_ms / 1000), ("no_pause", 0.0)):
            got = run(Path(tmp), messages, args.burst, pause)
            ours, raw = got["ours"], got["raw"]
            print(f"{label:8s} ours p50 {ours['p50_ms']:.3f} p99 {ours['p99_ms']:.3f} p99.9 {ours['p999_ms']:.3f}"
                  f" max {ours['max_ms']:.3f} ms, {ours['over_1ms']:.0f} over 1 ms;"
                  f" raw p50 {raw['p50_ms']:.3f} p99 {raw['p99_ms']:.3f} p99.9 {raw['p999_ms']:.3f}"
                  f" max {raw['max_ms']:.3f} ms, {raw['over_1ms']:.0f} over 1 ms;"
                  f" ours/raw p50 {ours['p50_ms'] / raw['p50_ms']:.2f} p99 {ours['p99_ms'] / raw['p99_ms']:.2f}")
            out[label] = {"ours": ours, "raw": raw, "p50_ratio": round(ours["p50_ms"] / raw["p50_ms"], 3),
                          "p99_ratio": round(ours["p99_ms"] / raw["p99_ms"], 3)}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
