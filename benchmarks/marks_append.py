"""What the ``message_marks`` projection costs an append: the same turns (the evaluation's chats,
which name people and places and speak of days) appended to two homes in one run, one with the
marks as shipped and one with the marks turned off (``sql.marks.marks_of`` giving none, as before
the projection), alternating in bursts and in both orders; and ``marks_of`` alone over the texts.

Since ADR-0085 an append on SQLite leaves its marks to a catch-up (the search index's upkeep in a
pause, or the first read of the marks): the ``on`` home's append should cost what the ``off``
home's does. What the catch-up costs is timed apart (``catch_up_us_per_turn``: the marks of every
turn written by :func:`~fermix_memory.adapters.sql.mark_writes.mark_new` in one transaction).

A third home gets marks found before it is timed (what writing the rows alone cost when they
were written with the message). Prints the median and p99 append in µs of each, their ratios and
differences, the share of turns with marks, and ``marks_of``'s µs per turn. The last line of
stdout is one JSON object.

    .venv/bin/python benchmarks/marks_append.py [--turns N] [--repeats R] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("FERMIX_RECALL_BY_MEANING", "false")  # appends only: no model

from fermix_memory import MemorySystem
from fermix_memory.adapters.sql import mark_writes as marks_module
from fermix_memory.domain.message_marks import marks_of

CHATS = Path(__file__).resolve().parent / "recall_eval" / "conversations.jsonl"
BURST = 4


def turns(limit: int) -> list[dict[str, Any]]:
    """The evaluation's turns, as appends (each chat a conversation of its own)."""
    out: list[dict[str, Any]] = []
    for line in CHATS.read_text(encoding="utf-8").splitlines():
        chat = json.loads(line)
        for session in chat["sessions"]:
            for t in session["turns"]:
                out.append({"agent_id": "ada", "owner_id": chat["id"], "conversation": f"eval:{chat['id']}",
                            "role": "user", "sender": t["speaker"], "content": t["text"],
                            "created_at": datetime.fromisoformat(t["created_at"])})
                if len(out) >= limit:
                    return out
    return out


def no_marks(text: str, said_at: datetime) -> tuple[str, ...]:
    return ()


def timed_appends(memories: dict[str, MemorySystem], specs: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Each home appends every turn, a burst at a time, the homes taking turns (the order swapped
    at each burst); the marks are off while the ``off`` home appends, and found beforehand (the
    rows' writing alone) while the ``written`` home does."""
    known = {(s["content"], s["created_at"]): marks_of(s["content"], s["created_at"]) for s in specs}
    arms = {"on": marks_of, "off": no_marks, "written": lambda text, at: known[(text, at)]}
    times: dict[str, list[float]] = {name: [] for name in memories}
    names = list(memories)
    for n, start in enumerate(range(0, len(specs), BURST)):
        for name in names if n % 2 == 0 else names[::-1]:
            marks_module.marks_of = arms[name]  # type: ignore[assignment]
            append = memories[name].append_message
            for spec in specs[start:start + BURST]:
                t = time.perf_counter()
                append(**spec)
                times[name].append(time.perf_counter() - t)
    marks_module.marks_of = marks_of  # type: ignore[assignment]
    return times


def one_run(specs: list[dict[str, Any]]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        memories = {name: MemorySystem.open(Path(tmp) / name) for name in ("on", "off", "written")}
        try:
            times = timed_appends(memories, specs)
        finally:
            for memory in memories.values():
                memory.close()
    us = {name: sorted(x * 1e6 for x in samples) for name, samples in times.items()}
    p50 = {name: statistics.median(v) for name, v in us.items()}
    p99 = {name: v[int(len(v) * 0.99)] for name, v in us.items()}
    return {"on_p50_us": round(p50["on"], 1), "off_p50_us": round(p50["off"], 1),
            "on_p99_us": round(p99["on"], 1), "off_p99_us": round(p99["off"], 1),
            "written_p50_us": round(p50["written"], 1),
            "p50_ratio": round(p50["on"] / p50["off"], 3), "p50_extra_us": round(p50["on"] - p50["off"], 1),
            "write_only_extra_us": round(p50["written"] - p50["off"], 1)}


def catch_up_cost(specs: list[dict[str, Any]]) -> float:
    """µs per turn of the catch-up that writes the turns' marks (``mark_new``), over a home whose
    turns all wait for theirs (best of three passes, each in a transaction rolled back)."""
    import apsw

    best = float("inf")
    with tempfile.TemporaryDirectory() as tmp:
        with MemorySystem.open(Path(tmp) / "home") as memory:
            memory.append_messages(specs)
        conn = apsw.Connection(str(Path(tmp) / "home" / "memory.db"))
        try:
            for _ in range(3):
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("DELETE FROM message_marks")
                conn.execute("DELETE FROM vector_marks WHERE kind = ?", (marks_module.MARK_KIND,))
                t = time.perf_counter()
                marks_module.mark_new(conn.cursor(), len(specs))
                best = min(best, time.perf_counter() - t)
                conn.execute("ROLLBACK")
        finally:
            conn.close()
    return best / len(specs) * 1e6


def parser_cost(specs: list[dict[str, Any]]) -> tuple[float, float]:
    """``marks_of``'s µs per turn over the texts (best of three passes), and the share of turns marked."""
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        found = [marks_of(s["content"], s["created_at"]) for s in specs]
        best = min(best, time.perf_counter() - t)
    return best / len(specs) * 1e6, sum(1 for f in found if f) / len(specs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=3000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="600 turns, 2 repeats")
    args = ap.parse_args()
    if args.quick:
        args.turns, args.repeats = 600, 2
    specs = turns(args.turns)
    runs = []
    for r in range(args.repeats):
        runs.append(one_run(specs))
        print(f"run {r + 1}: {runs[-1]}", file=sys.stderr)
    parse_us, marked = parser_cost(specs)
    result = {"turns": len(specs), "repeats": args.repeats, "marked_share": round(marked, 3),
              "marks_of_us_per_turn": round(parse_us, 1), "catch_up_us_per_turn": round(catch_up_cost(specs), 1),
              "p50_ratio_median": statistics.median(r["p50_ratio"] for r in runs),
              "p50_extra_us_median": statistics.median(r["p50_extra_us"] for r in runs),
              "write_only_extra_us_median": statistics.median(r["write_only_extra_us"] for r in runs), "runs": runs}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
