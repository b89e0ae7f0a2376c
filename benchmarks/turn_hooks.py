"""Latency of the turn hooks when nothing is due (SPEC §13: < 1 ms).

A conversation with a few hundred messages, no provider reporting a high peak: ``before_turn``
(preflight), ``after_turn`` (post-delivery: records the peak, queues the time-gated reviewer in
the background and returns) and ``compose_prompt`` (the memory block and the window), each
timed many times; beside them, in the same run, one durable ``append_message`` as a yardstick.

Cold ``compose_prompt``: the first call for each of many conversations (nothing of them cached),
beside, alternating in the same run, the raw read of the same window (the conversation's state row
and the columns of its messages a host needs to build the same request, plain apsw on the same
file): the ratio is ours / raw. Both have read the owner's prompt files once before (ours keeps
the current revisions; a host would too); ``--facts N`` gives the owner N memory rows, so each
prompt shows a ``MEMORY.md`` (some of its lines with an ``&``). ``--passes`` (3) passes, each
opening the home afresh: the figures are the median pass's, with each pass's ratio and the
ratio of the thread's CPU time (which a loaded machine disturbs less). Beside it, the statements a cold and a warm
``compose_prompt`` run on the composing thread's read connection (an exec trace, in a pass of
its own after the timed one: ADR-0062).

With ``--history 10000,200000,1000000`` only the cold ``compose_prompt`` is measured, in one home
grown to each size in turn (ADR-0068): the measured conversations first (100 of 100 messages at
10,000, else ``--conversations``), then other agents' conversations of 100 messages imported around
them (``import_history``, the bulk path, 25,000 lines a call); at each size the ratio, and whether
the window statement's plan is seeks only (``EXPLAIN QUERY PLAN``: no scan, no temporary B-tree).
``--quick`` stops at 200,000; ``--workdir DIR`` keeps the home.

Run from the repository root::

    .venv/bin/python benchmarks/turn_hooks.py [--conversations N] [--messages M] [--cold-only] [--facts N]
    .venv/bin/python benchmarks/turn_hooks.py --history 10000,200000,1000000 [--quick] [--workdir DIR]

The last line of stdout is one JSON object of the figures (milliseconds).
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
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
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


def owner_facts(memory: MemorySystem, facts: int) -> None:
    """``facts`` rows of the owner (every third naming two things with an ``&``): the owner's
    ``MEMORY.md``, which each prompt shows in its fence."""
    for i in range(facts):
        value = f"fact {i}: likes R&D talks & tea" if i % 3 == 0 else f"fact {i}: lives in Paris, works at ACME"
        memory.write_memory({"op": "add", "category": "context", "key": f"fact-{i}", "value": value},
                            agent_id=AGENT, owner_id=OWNER, trust="guest")


def cold_compose(conversations: int, messages: int, style: str = "openai", facts: int = 0,
                 passes: int = 3) -> dict[str, object]:
    """Median ms of the first ``compose_prompt`` of each conversation and of a raw read of its window,
    alternating conversation by conversation (half composed first, half read raw first)."""
    with tempfile.TemporaryDirectory(prefix="fermix-cold-") as home:
        with MemorySystem.open(Path(home)) as memory:
            owner_facts(memory, facts)
            for c in range(conversations):
                for i in range(messages):
                    memory.append_message(agent_id=AGENT, owner_id=OWNER, conversation=f"cold:{c}",
                                          role="user" if i % 2 == 0 else "assistant", sender="x",
                                          content=f"message {i}: I live in Paris and I like tea")
            memory.wait_for_background()
        figures = measure_cold(Path(home), conversations, style, passes)
        statements = compose_statements(Path(home), min(conversations, 21))
    return {**figures, **statements}


def measure_cold(home: Path, conversations: int, style: str = "openai", passes: int = 3) -> dict[str, object]:
    """The cold figures of ``cold:1`` .. ``cold:<conversations - 1>`` of an existing home, in
    ``passes`` passes, each opening it afresh (nothing of them cached): ours and the raw read,
    alternating. Each pass gives the ratio of the medians, wall clock and the thread's CPU time
    (which a loaded machine disturbs less); the figures are the median pass's."""
    walls: list[tuple[float, float]] = []
    cpus: list[tuple[float, float]] = []
    for _ in range(passes):
        wall, cpu = cold_pass(home, conversations, style)
        walls.append(wall)
        cpus.append(cpu)
    ratios = [ours / theirs for ours, theirs in walls]
    middle = sorted(range(passes), key=ratios.__getitem__)[passes // 2]
    cold, window = walls[middle]
    return {"cold_compose_ms": round(cold, 4), "raw_window_ms": round(window, 4),
            "cold_compose_ratio": round(ratios[middle], 2), "cold_compose_ratios": [round(r, 2) for r in ratios],
            "cold_compose_cpu_ratio": round(statistics.median(ours / theirs for ours, theirs in cpus), 2)}


def cold_pass(home: Path, conversations: int, style: str) -> tuple[tuple[float, float], tuple[float, float]]:
    """One pass of :func:`measure_cold`: the medians (ms) of ours and the raw read, wall clock and CPU time."""
    with MemorySystem.open(home) as memory:
        raw = apsw.Connection(str(home / "memory.db"), flags=apsw.SQLITE_OPEN_READONLY)
        memory.compose_prompt(AGENT, OWNER, "cold:0")  # the owner's prompt files, once
        ours: list[tuple[float, float]] = []
        theirs: list[tuple[float, float]] = []

        def compose(c: int) -> None:
            start, cpu = time.perf_counter(), time.thread_time()
            memory.compose_prompt(AGENT, OWNER, f"cold:{c}", style=style)  # type: ignore[call-overload]
            ours.append(((time.perf_counter() - start) * 1000, (time.thread_time() - cpu) * 1000))

        def read(c: int) -> None:
            start, cpu = time.perf_counter(), time.thread_time()
            cur = raw.cursor()
            state = cur.execute(RAW_STATE, (AGENT, "cold", str(c), "")).fetchall()
            after = state[0][0] if state else 0
            cur.execute(RAW_WINDOW, (AGENT, "cold", str(c), "", after)).fetchall()
            theirs.append(((time.perf_counter() - start) * 1000, (time.thread_time() - cpu) * 1000))

        for c in range(1, conversations):
            first, second = (compose, read) if c % 2 else (read, compose)
            first(c)
            second(c)
        raw.close()
    return ((statistics.median(w for w, _ in ours), statistics.median(w for w, _ in theirs)),
            (statistics.median(c for _, c in ours), statistics.median(c for _, c in theirs)))


# --- a home of a given size (--history) ----------------------------------------------------------

FILL_BATCH = 25_000  # lines per import_history call
FILL_PER_CONVERSATION = 100


def history_line(agent: str, conversation: tuple[str, str], i: int, at: datetime, owner: str = OWNER) -> str:
    """One SPEC §12 JSON line: the ``i``-th message of a conversation (user and assistant in turn)."""
    return json.dumps({"agent_id": agent, "owner_id": owner, "channel": conversation[0], "chat_id": conversation[1],
                       "role": "user" if i % 2 == 0 else "assistant", "sender": "x",
                       "content": f"message {i}: I live in Paris and I like tea", "created_at": at.isoformat()})


def grow(memory: MemorySystem, have: int, size: int, first: datetime) -> None:
    """Import other agents' conversations (``FILL_PER_CONVERSATION`` messages each, owners and
    agents varied) until the home holds ``size`` messages; ``have`` it holds now."""
    lines: list[str] = []
    for n in range(have, size):
        k = n // FILL_PER_CONVERSATION
        lines.append(history_line(f"agent-{k % 50}", ("fill", str(k)), n % FILL_PER_CONVERSATION,
                                  first + timedelta(seconds=n), owner=f"owner-{k % 997}"))
        if len(lines) == FILL_BATCH or n == size - 1:
            memory.import_history(lines)
            lines = []
            print(f"  {n + 1:,} messages", file=sys.stderr)
    memory.wait_for_background()


def plan_seeks_only(home: Path, key: tuple[str, str, str, str] = (AGENT, "cold", "1", "")) -> bool:
    """Whether the plan of the window statement (for the conversation ``key``: agent, channel,
    chat, thread scope) is seeks only (``SEARCH`` and the constant head row)."""
    from fermix_memory.adapters.sqlite.queries import WINDOW_AT_POSITION_SQL

    conn = apsw.Connection(str(home / "memory.db"), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        plan = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {WINDOW_AT_POSITION_SQL}",
                                               (*key, None))]
    finally:
        conn.close()
    return not any(("SCAN" in step and step != "SCAN CONSTANT ROW") or "TEMP B-TREE" in step for step in plan)


def cold_by_history(sizes: list[int], conversations: int, messages: int, style: str,
                    workdir: Path | None, passes: int = 3) -> dict[str, object]:
    """The cold figures in one home grown to each of ``sizes`` messages: the measured conversations
    (``conversations`` x ``messages``) first, then other agents' conversations imported around
    them; at each size, the figures and whether the window statement's plan is seeks only."""
    home = workdir or Path(tempfile.mkdtemp(prefix="fermix-history-"))
    at = datetime(2025, 1, 1, tzinfo=UTC)
    try:
        have = 0
        by_size: dict[str, dict[str, object]] = {}
        for size in sorted(sizes):
            with MemorySystem.open(home) as memory:
                if have == 0:  # the measured conversations, as the cold-only run builds them
                    memory.import_history([
                        history_line(AGENT, ("cold", str(c)), i, at + timedelta(seconds=c * messages + i))
                        for c in range(conversations) for i in range(messages)])
                    have = conversations * messages
                    print(f"  {have:,} messages", file=sys.stderr)
                grow(memory, have, size, at + timedelta(days=1))
                have = max(have, size)
            figures = measure_cold(home, conversations, style, passes)
            by_size[str(have)] = {**figures, "plan_seeks_only": plan_seeks_only(home)}
            print(f"{have:>9,} messages: cold compose {figures['cold_compose_ms']:.3f} ms, raw"
                  f" {figures['raw_window_ms']:.3f} ms, ratio {figures['cold_compose_ratio']:.2f}x,"
                  f" seeks only {by_size[str(have)]['plan_seeks_only']}")
    finally:
        if workdir is None:
            shutil.rmtree(home, ignore_errors=True)
    ratios = [float(f["cold_compose_ratio"]) for f in by_size.values()]  # type: ignore[arg-type]
    return {"history": by_size, "ratio_spread": round(max(ratios) - min(ratios), 2)}


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
    parser.add_argument("--history", type=lambda v: [int(x) for x in v.split(",")], default=None,
                        help="cold compose only, in one home grown to each of these sizes (messages), e.g."
                             " 10000,200000,1000000")
    parser.add_argument("--passes", type=int, default=3, help="cold passes (each opening the home afresh)")
    parser.add_argument("--facts", type=int, default=0,
                        help="memory rows of the owner (so each prompt shows a MEMORY.md of that many facts)")
    parser.add_argument("--quick", action="store_true", help="with --history: stop at 200,000 messages")
    parser.add_argument("--workdir", type=Path, default=None, help="with --history: the home (kept afterwards)")
    args = parser.parse_args()
    if args.history is not None:
        sizes = [n for n in args.history if not args.quick or n <= 200_000]
        conversations = min(args.conversations, max(2, min(sizes) // args.messages))
        figures = cold_by_history(sizes, conversations, args.messages, args.style, args.workdir, args.passes)
        print(json.dumps({"conversations": conversations, "messages": args.messages, "style": args.style,
                          **figures}))
        return 0
    cold = cold_compose(args.conversations, args.messages, args.style, args.facts, args.passes)
    print(f"cold compose_prompt ({args.messages} messages) {cold['cold_compose_ms']:.3f} ms   raw window read"
          f" {cold['raw_window_ms']:.3f} ms   ratio {cold['cold_compose_ratio']:.2f}x   statements: first"
          f" {cold['first_compose_statements']}, cold {cold['cold_compose_statements']:.1f},"
          f" warm {cold['warm_compose_statements']:.1f}")
    if args.cold_only:
        print(json.dumps({"conversations": args.conversations, "messages": args.messages, "style": args.style,
                          "facts": args.facts, **cold}))
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
