"""Benchmark: render USER.md and MEMORY.md from 10,000 memory rows with the real tiktoken counter.

Run by hand: ``.venv/bin/python benchmarks/render_rows.py [--rows N] [--runs R]``.
The last printed line is one JSON object with the figures (median milliseconds per render).

Scenarios: the default budgets (1500 / 2000 tokens), and a tight budget (300 tokens) that
forces the token-budget trimming path on both files.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

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


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args(argv)

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
    print(json.dumps(figures))


if __name__ == "__main__":
    os.environ.setdefault("FERMIX_RECALL_BY_MEANING", "false")  # meaning only where asked for (ADR-0044)
    main()
