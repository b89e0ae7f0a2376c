"""Latency of the turn hooks when nothing is due (SPEC §13: < 1 ms).

A conversation with a few hundred messages, no provider reporting a high peak: ``before_turn``
(preflight), ``after_turn`` (post-delivery: records the peak, queues the time-gated reviewer in
the background and returns) and ``compose_prompt`` (the memory block and the window), each
timed many times; beside them, in the same run, one durable ``append_message`` as a yardstick.

Run from the repository root::

    .venv/bin/python benchmarks/turn_hooks.py

The last line of stdout is one JSON object of the figures (milliseconds).
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from fermix_memory import MemorySystem

AGENT, OWNER, CONVERSATION = "ada", "alice", "telegram:1"
RUNS = 2_000


def timed(action: Callable[[], object], runs: int = RUNS) -> dict[str, float]:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        action()
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return {"p50_ms": round(statistics.median(samples), 4), "p95_ms": round(samples[int(len(samples) * 0.95)], 4)}


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="fermix-hooks-") as home, MemorySystem.open(Path(home)) as memory:
        for i in range(300):
            memory.append_message(agent_id=AGENT, owner_id=OWNER, conversation=CONVERSATION,
                                  role="user" if i % 2 == 0 else "assistant", sender="x",
                                  content=f"message {i}: I live in Paris and I like tea")
        memory.review_now()
        memory.wait_for_background()
        figures = {
            "before_turn": timed(lambda: memory.before_turn(agent_id=AGENT, owner_id=OWNER,
                                                            conversation=CONVERSATION)),
            "after_turn": timed(lambda: memory.after_turn(agent_id=AGENT, owner_id=OWNER, conversation=CONVERSATION,
                                                          peak_prompt_tokens=1_000)),
            "compose_prompt": timed(lambda: memory.compose_prompt(AGENT, OWNER, CONVERSATION), runs=500),
            "append_message": timed(lambda: memory.append_message(
                agent_id=AGENT, owner_id=OWNER, conversation="telegram:2", role="user", sender="x",
                content="yardstick"), runs=500),
        }
        memory.wait_for_background()
    for name, f in figures.items():
        print(f"{name:15s} p50 {f['p50_ms']:.3f} ms   p95 {f['p95_ms']:.3f} ms")
    result = {"runs": RUNS, **{f"{k}_{m}": v for k, f in figures.items() for m, v in f.items()},
              "hooks_under_1ms": all(figures[k]["p95_ms"] < 1.0 for k in ("before_turn", "after_turn"))}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
