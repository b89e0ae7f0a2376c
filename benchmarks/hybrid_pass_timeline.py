"""When a new query's pass through the model runs, beside the search by words (ADR-0071, ADR-0086).

Each hybrid recall of a new query (``source="all"``, limit 10, on the ``--quick`` home of
``benchmarks/hybrid_recall.py`` by default) is timed from its start: when the search by words
starts and ends, when the model's pass starts and ends, when recall returns (``after_pass_ms``:
how long after the pass); shipped (the query tokenised on the caller's thread, the pass handed
to a thread kept waiting, on the queries' session of two threads where there are two cores:
ADR-0096), the pass on the stored texts' one-thread session as shipped before ADR-0096
(``one_thread``), the shipped way with a caller that goes on at once rather than wait (at most
``PASS_START_WAIT_S``) for the pass to start (``no_start_wait``, as before ADR-0096), and a thread
started per query, which tokenises and then runs the pass (``thread_per_query``), taking turns.
Medians per way; the overlap share is the part of the search by words the pass ran beside.

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
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import hybrid_recall as bench
import onnxruntime

from fermix_memory import MemorySystem
from fermix_memory.adapters.embedding.minilm_onnx import MiniLmOnnxEmbedder
from fermix_memory.adapters.sqlite.queries import SqliteQueries
from fermix_memory.application import semantic

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


@contextmanager
def start_wait(seconds: float) -> Iterator[None]:
    """Recall whose caller waits at most ``seconds`` for a new query's pass to start."""
    shipped = semantic.PASS_START_WAIT_S
    semantic.PASS_START_WAIT_S = seconds
    try:
        yield
    finally:
        semantic.PASS_START_WAIT_S = shipped


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=240)
    parser.add_argument("--rows", type=int, default=40)
    parser.add_argument("--queries", type=int, default=60)
    args = parser.parse_args(argv)
    timed(onnxruntime.InferenceSession, "run", "pass")
    timed(SqliteQueries, "search_memories", "words")
    timed(SqliteQueries, "search_history", "history")
    ways: dict[str, list[dict[str, float]]] = {"shipped": [], "one_thread": [], "no_start_wait": [],
                                               "thread_per_query": []}
    with tempfile.TemporaryDirectory() as scratch:
        home = Path(scratch) / "home"
        bench.progress(f"building the home: {args.messages:,} messages, {args.rows} rows")
        bench.build(home, args.messages, args.rows)
        with (MemorySystem.open(home, embedder=bench.loaded(MiniLmOnnxEmbedder()), readonly=True) as memory,
              MemorySystem.open(home, embedder=MiniLmOnnxEmbedder(query_threads=1), readonly=True) as former):
            def ask(text: str, by: MemorySystem = memory) -> dict[str, float]:
                marks.clear()
                cpu, started[0] = time.process_time(), time.perf_counter()
                by.recall(text, agent_id=bench.AGENT, owner_id=bench.OWNER, conversation=bench.CONV,
                          source="all", mode="hybrid", limit=10)
                return {**marks, "end": (time.perf_counter() - started[0]) * 1000,
                        "cpu": (time.process_time() - cpu) * 1000}

            for n in range(5):
                ask(f"warm-up {n}: {bench.question(n)}")
                ask(f"warm-up {n}: {bench.question(n)}", former)
            names = list(ways)
            for n in range(args.queries):
                for way in names[n % len(names):] + names[:n % len(names)]:
                    if way == "shipped":
                        ways[way].append(ask(bench.question(n)))
                    elif way == "one_thread":
                        ways[way].append(ask(bench.question(n), former))
                    elif way == "no_start_wait":
                        with start_wait(0.0):
                            ways[way].append(ask(bench.question(n) + " "))
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
                        "recall_ms": round(statistics.median(c["end"] for c in calls), 3),
                        "recall_cpu_ms": round(statistics.median(c["cpu"] for c in calls), 3)}
        bench.progress(f"{way}: {figures[way]}")
    for other in ("one_thread", "no_start_wait", "thread_per_query"):
        for kind in ("recall_ms", "recall_cpu_ms"):
            figures[f"ratio_{kind[:-3]}_shipped_to_{other}"] = round(
                figures["shipped"][kind] / figures[other][kind], 2)
    print(json.dumps({"messages": args.messages, "rows": args.rows, "queries": args.queries, **figures}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
