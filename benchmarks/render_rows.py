"""Benchmark: render USER.md and MEMORY.md from 10,000 memory rows with the real tiktoken counter,
and what a memory write costs with its prompt files rendered, at two sizes of the owner.

Run by hand: ``.venv/bin/python benchmarks/render_rows.py [--rows N] [--runs R] [--quick]``.
The last printed line is one JSON object with the figures (median milliseconds per render).

Scenarios: the default budgets (1500 / 2000 tokens), and a tight budget (300 tokens) that
forces the token-budget trimming path on both files.

Write cost (``write``): one home, two owners holding ``--small`` and ``--large`` rows (filled
untimed); then one ``write_memory`` of a new row at a time, the owners and two ways of reading
the rows to render taking turns slice by slice (a noisy neighbour taxes all alike): ``bounded``,
the store's read of the rows a file may show (ADR-0060), and ``full``, every live row of the owner
(the reading before it, put back for the comparison). ``flatness`` is the large owner's write
time over the small owner's (1.0: flat); ``full_over_bounded`` how much dearer the full reading
makes a write of the large owner. CPU time per write is given beside wall-clock time.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from fermix_memory import MemorySystem
from fermix_memory.adapters.sql.transaction import SqlTransaction
from fermix_memory.adapters.tokens_tiktoken import TiktokenCounter
from fermix_memory.domain.memory import Memory
from fermix_memory.domain.rendering import render_memory_md, render_user_md
from fermix_memory.domain.values import Category, PromoteTarget, ScopeType

WORDS = [
    "prefers", "coffee", "flat", "white", "oat", "milk", "morning", "runs", "marathon", "project",
    "fermix", "deadline", "friday", "python", "rust", "sqlite", "wal", "budget", "tokens",
    "café", "naïve", "中文", "日本語", "🚀", "review", "weekly", "standup",
]  # fmt: skip


def build_rows(n: int, seed: int = 42) -> list[Memory]:
    """``n`` random rows over every category, scope, archive state and promote target."""
    rng = random.Random(seed)
    t0 = datetime(2024, 1, 1, tzinfo=UTC)
    categories = list(Category)
    scopes = [ScopeType.OWNER, ScopeType.OWNER, ScopeType.AGENT, ScopeType.CONVERSATION, ScopeType.JOB]
    rows = []
    for i in range(n):
        category = rng.choice(categories)
        target: PromoteTarget | None = category.promote_target if rng.random() < 0.9 else None
        rows.append(
            Memory(
                id=i + 1,
                agent_id="agent",
                owner_id="owner",
                scope_type=rng.choice(scopes),
                scope_id="scope",
                category=category,
                key=f"{rng.choice(WORDS)}_{i}",
                value=" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 60))),
                confidence=rng.random(),
                promote_target=target,
                archived_at=t0 if rng.random() < 0.1 else None,
                created_at=t0,
                updated_at=t0 + timedelta(seconds=rng.randint(0, 10_000_000)),
            )
        )
    return rows


def median_ms(work: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        work()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


CATEGORIES = ("identity", "preference", "interest", "goal", "context")


def _fill(memory: MemorySystem, owner: str, count: int) -> None:
    """``count`` rows over the five categories a guest may write, ten standing rules among them."""
    for start in range(0, count, 500):
        ops = [{"op": "add", "category": CATEGORIES[i % 5], "key": f"{owner}-{i}",
                "value": " ".join(WORDS[(i + j) % len(WORDS)] for j in range(3 + i % 12))}
               for i in range(start, min(count, start + 500))]
        memory.write_memory(ops, agent_id="bench", owner_id=owner, trust="operator")
    rules = [{"op": "add", "category": "directive", "key": f"{owner}-rule-{i}", "value": f"Rule {i} of {owner}"}
             for i in range(5)]
    memory.write_memory(rules, agent_id="bench", owner_id=owner, trust="operator")


@contextmanager
def _reading(way: str) -> Iterator[None]:
    """Render from the bounded read, or (``full``) from every live row of the owner."""
    if way == "bounded":
        yield
        return
    bounded = SqlTransaction.shown_rows
    SqlTransaction.shown_rows = lambda tx, agent, owner, sections: tx.memories_of(agent, owner)  # type: ignore[method-assign]
    try:
        yield
    finally:
        SqlTransaction.shown_rows = bounded  # type: ignore[method-assign]


def write_cost(small: int, large: int, writes: int, slices: int) -> dict[str, Any]:
    """Milliseconds per ``write_memory`` of one new row (median slice), by owner size and reading."""
    times: dict[tuple[str, str], list[tuple[float, float]]] = {}
    counter = itertools.count()
    with tempfile.TemporaryDirectory() as folder, MemorySystem.open(Path(folder) / "home") as memory:
        sizes = {"small": small, "large": large}
        for owner, count in sizes.items():
            _fill(memory, owner, count)
            print(f"filled {owner}: {count} rows", file=sys.stderr)
        for _ in range(slices):
            for way in ("bounded", "full"):
                for owner in sizes:
                    with _reading(way):
                        wall, cpu = time.perf_counter(), time.process_time()
                        for _ in range(writes):
                            n = next(counter)
                            memory.write_memory({"op": "add", "category": CATEGORIES[n % 5], "key": f"new-{n}",
                                                 "value": f"new fact {n} {WORDS[n % len(WORDS)]}"},
                                                agent_id="bench", owner_id=owner, trust="operator")
                        times.setdefault((way, owner), []).append(
                            ((time.perf_counter() - wall) * 1000 / writes, (time.process_time() - cpu) * 1000 / writes))
    ms = {f"{way}_{owner}_ms": round(statistics.median(t[0] for t in slice_times), 3)
          for (way, owner), slice_times in times.items()}
    cpu = {f"{way}_{owner}_cpu_ms": round(statistics.median(t[1] for t in slice_times), 3)
           for (way, owner), slice_times in times.items()}
    figures: dict[str, Any] = {"small_rows": small, "large_rows": large, "writes_per_slice": writes,
                               "slices": slices, **ms, **cpu}
    for unit in ("ms", "cpu_ms"):
        suffix = "" if unit == "ms" else "_cpu"
        for way in ("bounded", "full"):
            large, small = figures[f"{way}_large_{unit}"], figures[f"{way}_small_{unit}"]
            figures[f"{way}_flatness{suffix}"] = round(large / small, 2)
        figures[f"full_over_bounded_large{suffix}"] = round(
            figures[f"full_large_{unit}"] / figures[f"bounded_large_{unit}"], 2)
    return figures


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--small", type=int, default=100, help="rows of the small owner (write cost)")
    parser.add_argument("--large", type=int, default=5_000, help="rows of the large owner (write cost)")
    parser.add_argument("--quick", action="store_true", help="fewer runs, writes and slices (well under a minute)")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs = min(args.runs, 5)
    writes, slices = (10, 3) if args.quick else (40, 7)

    started = time.perf_counter()
    counter = TiktokenCounter()
    load_ms = (time.perf_counter() - started) * 1000
    rows = build_rows(args.rows)
    count = counter.count

    user_md = render_user_md(rows, count)
    memory_md = render_memory_md(rows, count)
    figures = {
        "rows": args.rows,
        "runs": args.runs,
        "encoding": counter.encoding_name,
        "encoding_load_ms": round(load_ms, 2),
        "user_md_ms": round(median_ms(lambda: render_user_md(rows, count), args.runs), 3),
        "memory_md_ms": round(median_ms(lambda: render_memory_md(rows, count), args.runs), 3),
        "user_md_tight_ms": round(median_ms(lambda: render_user_md(rows, count, budget=300), args.runs), 3),
        "memory_md_tight_ms": round(
            median_ms(lambda: render_memory_md(rows, count, budget=300), args.runs), 3
        ),
        "user_md_tokens": count(user_md),
        "memory_md_tokens": count(memory_md),
        "user_md_tight_tokens": count(render_user_md(rows, count, budget=300)),
        "memory_md_tight_tokens": count(render_memory_md(rows, count, budget=300)),
    }
    print(f"{args.rows} rows, median of {args.runs} runs, encoding {counter.encoding_name}")
    print(f"  USER.md   default budget: {figures['user_md_ms']} ms ({figures['user_md_tokens']} tokens)")
    print(f"  MEMORY.md default budget: {figures['memory_md_ms']} ms ({figures['memory_md_tokens']} tokens)")
    print(f"  USER.md   budget 300:     {figures['user_md_tight_ms']} ms")
    print(f"  MEMORY.md budget 300:     {figures['memory_md_tight_ms']} ms")
    figures["write"] = write = write_cost(args.small, args.large, writes, slices)
    for way in ("bounded", "full"):
        print(f"  write, {way} read: {write[f'{way}_small_ms']} ms at {args.small} rows,"
              f" {write[f'{way}_large_ms']} ms at {args.large} rows (flatness {write[f'{way}_flatness']})")
    print(f"  full read over bounded at {args.large} rows: {write['full_over_bounded_large']}x")
    print(json.dumps(figures))


if __name__ == "__main__":
    os.environ.setdefault("FERMIX_RECALL_BY_MEANING", "false")  # meaning only where asked for (ADR-0044)
    main()
