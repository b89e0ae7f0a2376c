"""When a new query's pass through the model runs, beside the search by words (ADR-0071, ADR-0086).

Each hybrid recall of a new query (``source="all"``, limit 10, on the ``--quick`` home of
``benchmarks/hybrid_recall.py`` by default) is timed from its start: when the search by words
starts and ends, when the model's pass starts and ends, when recall returns (``after_pass_ms``:
how long after the pass); shipped (the query tokenised on the caller's thread, the pass handed
to a thread kept waiting) and as before (a thread started per query, which tokenises and then runs
the pass), taking turns. Medians per way; the overlap share is the part of the search by words the pass ran beside.

Progress goes to stderr; the LAST line of stdout is one JSON object.

    .venv/bin/python benchmarks/hybrid_pass_timeline.py            # 240 messages, 40 rows, 60 queries
    .venv/bin/python benchmarks/hybrid_pass_timeline.py --messages 2000 --rows 200
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import hybrid_recall as bench
import onnxruntime

from fermix_memory import MemorySystem
from fermix_memory.adapters.embedding.minilm_onnx import MiniLmOnnxEmbedder
from fermix_memory.adapters.sqlite.queries import SqliteQueries

marks: dict[str, float] = {}
started = [0.0]


def timed(owner: Any, name: str, label: str) -> None:
    """``owner.name`` marking its first start and end in each call as ``label+`` / ``label-``."""
    inner: Callable[..., Any] = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        marks.setdefault(f"{label}+", (time.perf_counter() - started[0]) * 1000)
        try:
            return inner(*args, **kwargs)
        finally:
            marks.setdefault(f"{label}-", (time.perf_counter() - started[0]) * 1000)
    setattr(owner, name, wrapper)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=240)
    parser.add_argument("--rows", type=int, default=40)
    parser.add_argument("--queries", type=int, default=60)
    args = parser.parse_args(argv)
    timed(onnxruntime.InferenceSession, "run", "pass")
    timed(SqliteQueries, "search_memories", "words")
    timed(SqliteQueries, "search_history", "history")
    ways: dict[str, list[dict[str, float]]] = {"shipped": [], "thread_per_query": []}
    with tempfile.TemporaryDirectory() as scratch:
        home = Path(scratch) / "home"
        bench.progress(f"building the home: {args.messages:,} messages, {args.rows} rows")
        bench.build(home, args.messages, args.rows)
        with MemorySystem.open(home, embedder=MiniLmOnnxEmbedder(), readonly=True) as memory:
            def ask(text: str) -> dict[str, float]:
                marks.clear()
                started[0] = time.perf_counter()
                memory.recall(text, agent_id=bench.AGENT, owner_id=bench.OWNER, conversation=bench.CONV,
                              source="all", mode="hybrid", limit=10)
                return {**marks, "end": (time.perf_counter() - started[0]) * 1000}

            for n in range(5):
                ask(f"warm-up {n}: {bench.question(n)}")
            for n in range(args.queries):
                for way in ("shipped", "thread_per_query") if n % 2 else ("thread_per_query", "shipped"):
                    if way == "shipped":
                        ways[way].append(ask(bench.question(n)))
                    else:
                        with bench.thread_per_query():
                            ways[way].append(ask(bench.question(n) + "  "))
    figures: dict[str, Any] = {}
    for way, calls in ways.items():
        words = [c["history-"] - c["words+"] for c in calls]
        overlap = [max(0.0, min(c["history-"], c["pass-"]) - max(c["words+"], c["pass+"])) / w
                   for c, w in zip(calls, words, strict=True)]
        figures[way] = {"words_start_ms": round(statistics.median(c["words+"] for c in calls), 3),
                        "pass_start_ms": round(statistics.median(c["pass+"] for c in calls), 3),
                        "words_ms": round(statistics.median(words), 3),
                        "pass_ms": round(statistics.median(c["pass-"] - c["pass+"] for c in calls), 3),
                        "overlap_share": round(statistics.median(overlap), 3),
                        # What waits for the vector: the recall's end after the pass's.
                        "after_pass_ms": round(statistics.median(c["end"] - c["pass-"] for c in calls), 3),
                        "recall_ms": round(statistics.median(c["end"] for c in calls), 3)}
        bench.progress(f"{way}: {figures[way]}")
    figures["ratio_recall_shipped_to_thread_per_query"] = round(
        figures["shipped"]["recall_ms"] / figures["thread_per_query"]["recall_ms"], 2)
    print(json.dumps({"messages": args.messages, "rows": args.rows, "queries": args.queries, **figures}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
