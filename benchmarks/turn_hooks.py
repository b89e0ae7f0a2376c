"""Latency of the turn hooks when nothing is due (SPEC §13: < 1 ms).

A conversation with a few hundred messages, no provider reporting a high peak: ``before_turn``
(preflight), ``after_turn`` (post-delivery: records the peak, queues the time-gated reviewer in
the background and returns) and ``compose_prompt`` (the memory block and the window), each
timed many times; beside them, in the same run, one durable ``append_message`` as a yardstick.

Cold ``compose_prompt``: the first call for each of many conversations (nothing of them cached),
beside, alternating in the same run, the raw read of the same window (the conversation's state row
and the columns of its messages a host needs to build the same request, plain apsw on the same
file): the ratio is ours / raw. Both have read the owner's prompt files once before (ours keeps
the current revisions; a host would too). Beside it, the statements a cold and a warm
``compose_prompt`` run on the composing thread's read connection (an exec trace, in a pass of
its own after the timed one: ADR-0062).

Run from the repository root::

    .venv/bin/python benchmarks/turn_hooks.py [--conversations N] [--messages M] [--cold-only]

The last line of stdout is one JSON object of the figures (milliseconds).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import apsw

from fermix_memory import MemorySystem
from fermix_memory.entrypoints.bootstrap import bootstrap
from fermix_memory.entrypoints.home import open_store

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


RAW_STATE = ("SELECT window_start_id, checkpoint_message_id FROM conversation_state"
             " WHERE agent_id = ? AND channel = ? AND chat_id = ? AND thread_scope = ?")
# What a host needs of each message of the window to build the same request: who wrote it (the
# sender, else the owner), the role, the text, the tool calls and call ids (metadata), whether it is
# a checkpoint (kind) or an operator's note (trust), and the id (the checkpoint leads the window).
RAW_COLUMNS = "id, owner_id, sender, role, kind, content, metadata_json, trust"
RAW_WINDOW = (f"SELECT {RAW_COLUMNS} FROM messages WHERE agent_id = ? AND channel = ? AND chat_id = ?"
              " AND thread_scope = ? AND id > ? ORDER BY created_at, id")


def cold_compose(conversations: int, messages: int, style: str = "openai") -> dict[str, float]:
    """Median ms of the first ``compose_prompt`` of each conversation and of a raw read of its window,
    alternating conversation by conversation (half composed first, half read raw first)."""
    with tempfile.TemporaryDirectory(prefix="fermix-cold-") as home:
        with MemorySystem.open(Path(home)) as memory:
            for c in range(conversations):
                for i in range(messages):
                    memory.append_message(agent_id=AGENT, owner_id=OWNER, conversation=f"cold:{c}",
                                          role="user" if i % 2 == 0 else "assistant", sender="x",
                                          content=f"message {i}: I live in Paris and I like tea")
            memory.wait_for_background()
        with MemorySystem.open(Path(home)) as memory:
            raw = apsw.Connection(str(Path(home) / "memory.db"), flags=apsw.SQLITE_OPEN_READONLY)
            memory.compose_prompt(AGENT, OWNER, "cold:0")  # the owner's prompt files, once
            ours, theirs = [], []

            def compose(c: int) -> None:
                start = time.perf_counter()
                memory.compose_prompt(AGENT, OWNER, f"cold:{c}", style=style)  # type: ignore[call-overload]
                ours.append((time.perf_counter() - start) * 1000)

            def read(c: int) -> None:
                start = time.perf_counter()
                cur = raw.cursor()
                state = cur.execute(RAW_STATE, (AGENT, "cold", str(c), "")).fetchall()
                after = state[0][0] if state else 0
                cur.execute(RAW_WINDOW, (AGENT, "cold", str(c), "", after)).fetchall()
                theirs.append((time.perf_counter() - start) * 1000)

            for c in range(1, conversations):
                first, second = (compose, read) if c % 2 else (read, compose)
                first(c)
                second(c)
            raw.close()
        statements = compose_statements(Path(home), min(conversations, 21))
    cold, window = statistics.median(ours), statistics.median(theirs)
    return {"cold_compose_ms": round(cold, 4), "raw_window_ms": round(window, 4),
            "cold_compose_ratio": round(cold / window, 2), **statements}


def compose_statements(home: Path, conversations: int) -> dict[str, float]:
    """Statements per cold ``compose_prompt`` (the owner's files kept, as in the timed pass; and
    the very first one, files too) and per warm one, counted on the reader of this thread."""
    store = open_store(home)
    with MemorySystem(bootstrap(home, store=store)) as memory:
        reader, seen = store.reader(), []
        reader.exec_trace = lambda _cursor, sql, _bindings: seen.append(sql) or True
        memory.compose_prompt(AGENT, OWNER, "cold:0")
        first = len(seen)
        for c in range(1, conversations):
            memory.compose_prompt(AGENT, OWNER, f"cold:{c}")
        cold = (len(seen) - first) / (conversations - 1)
        for c in range(1, conversations):
            memory.compose_prompt(AGENT, OWNER, f"cold:{c}")
        warm = (len(seen) - first) / (conversations - 1) - cold
        reader.exec_trace = None
    return {"first_compose_statements": first, "cold_compose_statements": cold, "warm_compose_statements": warm}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--messages", type=int, default=100, help="messages per conversation (cold compose)")
    parser.add_argument("--cold-only", action="store_true", help="only the cold compose_prompt figures")
    parser.add_argument("--style", choices=("openai", "anthropic"), default="openai",
                        help="the prompt shape composed cold")
    args = parser.parse_args()
    cold = cold_compose(args.conversations, args.messages, args.style)
    print(f"cold compose_prompt ({args.messages} messages) {cold['cold_compose_ms']:.3f} ms   raw window read"
          f" {cold['raw_window_ms']:.3f} ms   ratio {cold['cold_compose_ratio']:.2f}x   statements: first"
          f" {cold['first_compose_statements']}, cold {cold['cold_compose_statements']:.1f},"
          f" warm {cold['warm_compose_statements']:.1f}")
    if args.cold_only:
        print(json.dumps({"conversations": args.conversations, "messages": args.messages, "style": args.style,
                          **cold}))
        return 0
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
    result = {"runs": RUNS, **cold, **{f"{k}_{m}": v for k, f in figures.items() for m, v in f.items()},
              "hooks_under_1ms": all(figures[k]["p95_ms"] < 1.0 for k in ("before_turn", "after_turn"))}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("FERMIX_RECALL_BY_MEANING", "false")  # meaning only where asked for (ADR-0044)
    sys.exit(main())
