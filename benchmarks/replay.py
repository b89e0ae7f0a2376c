"""Replay (rebuilding every projection from the event log) of fermix-memory beside its limit.

SPEC §13: replay >= 1.0x a raw batched rebuild loop. Every figure comes from THIS run.

The source database is built through the product: ``--messages`` messages (default 100,000)
imported as SPEC §12 JSON Lines over 40 agent/owner pairs, then memory writes through
admission (adds, replaces, archives), which also record prompt-file revisions. Then, in
turns (``--rounds``), each variant rebuilds the projections into its own fresh database:

* **ours** — ``fold_log`` (the rebuild inside ``fermix events replay`` and ``verify``): copies
  the log and runs the product's projection functions on every decoded event.
* **raw batched rebuild loop** — the limit: plain apsw on a fresh database with the product's
  schema and pragmas, reading the source log and, in transactions of 5,000 events, inserting
  each ``events`` row and the projection rows straight from the JSON payload (FTS5 kept in
  sync by the schema's triggers). It handles exactly the event kinds the source holds and its
  result must have the same projection checksums as the source (checked: ``raw_identical``).

Also reported: the whole ``replay_into`` (rebuild + checksum comparison + FTS integrity
check) and whether its tables are identical to the source's.

Run (from the repository root)::

    .venv/bin/python benchmarks/replay.py --quick     # smoke run
    .venv/bin/python benchmarks/replay.py             # 100,000 messages, 3 rounds

The LAST line of stdout is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import apsw

from fermix_memory import MemorySystem
from fermix_memory.adapters.sql.scope_tokens import message_scope_tokens
from fermix_memory.adapters.sqlite.audit import fold_log, replay_into, table_checksums
from fermix_memory.adapters.sqlite.connection import enable_wal, open_connection
from fermix_memory.adapters.sqlite.schema import migrate
from fermix_memory.domain.values import ConversationKey

WORDS = [
    "coffee", "tea", "morning", "evening", "project", "deadline", "friday", "travel", "berlin", "paris",
    "music", "guitar", "piano", "running", "marathon", "python", "rust", "sqlite", "budget", "tokens",
    "review", "weekly", "standup", "café", "naïve", "garden", "dinner", "book", "meeting", "email",
    "report", "flight", "hotel", "doctor", "dentist", "birthday", "gift", "recipe", "pasta",
]  # fmt: skip
CATEGORIES = ["preference", "interest", "goal", "context"]
BATCH = 5_000


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# --- the source database, built through the product --------------------------------------------


def history_lines(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    lines = []
    for i in range(n):
        pair = rng.randrange(40)
        role = "user" if i % 2 == 0 else "assistant"
        agent, owner = f"agent-{pair:02d}", f"owner-{pair:02d}"
        lines.append(json.dumps({
            "agent_id": agent, "owner_id": owner, "channel": "telegram", "chat_id": f"chat-{pair:02d}-{i % 3}",
            "role": role, "sender": owner if role == "user" else agent,
            "content": " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 40))),
            "created_at": (t0 + timedelta(seconds=i)).isoformat(),
        }))
    return lines


def build_source(home: Path, messages: int, facts: int) -> Path:
    with MemorySystem.open(home) as memory:
        lines = history_lines(messages)
        for start in range(0, len(lines), 25_000):
            memory.import_history(lines[start:start + 25_000])
        rng = random.Random(11)
        for i in range(facts):
            agent, owner = f"agent-{i % 40:02d}", f"owner-{i % 40:02d}"
            [added] = memory.write_memory({"op": "add", "category": rng.choice(CATEGORIES),
                                           "key": f"topic_{i}", "value": f"likes {rng.choice(WORDS)}"},
                                          agent_id=agent, owner_id=owner)
            if i % 3 == 0 and added.memory_id is not None:
                memory.write_memory({"op": "replace", "id": added.memory_id, "value": f"now {rng.choice(WORDS)}"},
                                    agent_id=agent, owner_id=owner)
            if i % 10 == 0 and added.memory_id is not None:
                memory.write_memory({"op": "archive", "id": added.memory_id, "reason": "no longer true"},
                                    agent_id=agent, owner_id=owner)
    return home / "memory.db"


# --- the raw batched rebuild loop (the limit) -----------------------------------------------------


def _canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class RawRebuild:
    """Events copied and projections written straight from the JSON payloads, no library code."""

    def __init__(self, cur: apsw.Cursor) -> None:
        self.cur = cur

    def message(self, position: int, p: dict[str, Any]) -> None:
        c = p["conversation"]
        key = ConversationKey(c["channel"], c["chat_id"], c["thread_scope"])
        self.cur.execute(
            "INSERT INTO messages(id, agent_id, owner_id, channel, chat_id, thread_scope, sender, role, kind,"
            " content, metadata_json, created_at, trust, scope_tokens) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (position, p["agent_id"], p["owner_id"], c["channel"], c["chat_id"], c["thread_scope"], p["sender"],
             p["role"], p["message_kind"], p["content"], _canonical_json(p["metadata"]) if p["metadata"] else "{}",
             p["created_at"], p["trust"], message_scope_tokens(p["agent_id"], p["owner_id"], key)))

    def memory_added(self, position: int, p: dict[str, Any]) -> None:
        v = p["provenance"]
        self.cur.execute(
            "INSERT INTO memories(id, agent_id, owner_id, scope_type, scope_id, category, key, value, confidence,"
            " promote_target, source_id, source_type, source_name, source_description, session_id, run_id,"
            " source_message_id, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (position, p["agent_id"], p["owner_id"], p["scope_type"], p["scope_id"], p["category"], p["key"],
             p["value"], p["confidence"], p["promote_target"], v["source_id"], v["source_type"], p["source_name"],
             p["source_description"], v["session_id"], v["run_id"], v["source_message_id"], p["at"], p["at"]))

    def memory_replaced(self, position: int, p: dict[str, Any]) -> None:
        v = p["provenance"]
        self.cur.execute(
            "UPDATE memories SET category = ?, key = ?, value = ?, confidence = ?, promote_target = ?,"
            " source_id = ?, source_type = ?, session_id = ?, run_id = ?, source_message_id = ?,"
            " archived_at = NULL, archived_by = NULL, archive_reason = NULL, updated_at = ? WHERE id = ?",
            (p["category"], p["key"], p["value"], p["confidence"], p["promote_target"], v["source_id"],
             v["source_type"], v["session_id"], v["run_id"], v["source_message_id"], p["at"], p["memory_id"]))

    def memory_archived(self, position: int, p: dict[str, Any]) -> None:
        self.cur.execute(
            "UPDATE memories SET archived_at = ?, archived_by = ?, archive_reason = ?, updated_at = ? WHERE id = ?",
            (p["at"], p["archived_by"], p["reason"], p["at"], p["memory_id"]))

    def resource_revised(self, position: int, p: dict[str, Any]) -> None:
        self.cur.execute(
            "INSERT INTO resource_revisions(agent_id, owner_id, name, revision, content, content_sha256, reason,"
            " created_at) VALUES (?,?,?,?,?,?,?,?)",
            (p["agent_id"], p["owner_id"], p["name"], p["revision"], p["content"], p["content_sha256"],
             p["reason"], p["at"]))
        self.cur.execute(
            "INSERT INTO resources(agent_id, owner_id, name, current_revision, content_sha256, updated_at)"
            " VALUES (?,?,?,?,?,?) ON CONFLICT(agent_id, owner_id, name) DO UPDATE SET"
            " current_revision = excluded.current_revision, content_sha256 = excluded.content_sha256,"
            " updated_at = excluded.updated_at",
            (p["agent_id"], p["owner_id"], p["name"], p["revision"], p["content_sha256"], p["at"]))


def raw_rebuild(source: apsw.Connection, target: apsw.Connection) -> int:
    cur = target.cursor()
    raw = RawRebuild(cur)
    handlers = {"message.appended": raw.message, "memory.added": raw.memory_added,
                "memory.replaced": raw.memory_replaced, "memory.archived": raw.memory_archived,
                "resource.revised": raw.resource_revised}
    count = 0
    cur.execute("BEGIN IMMEDIATE")
    for row in source.execute(
        "SELECT position, stream, version, kind, schema, recorded_at, payload, payload_sha256, prev_hash, hash"
        " FROM events ORDER BY position"
    ):
        cur.execute(
            "INSERT INTO events(position, stream, version, kind, schema, recorded_at, payload, payload_sha256,"
            " prev_hash, hash) VALUES (?,?,?,?,?,?,?,?,?,?)", row)
        handler = handlers.get(row[3])
        if handler is None:
            raise SystemExit(f"the raw loop does not handle {row[3]!r} events")
        handler(row[0], json.loads(row[6]))
        count += 1
        if count % BATCH == 0:
            cur.execute("COMMIT")
            cur.execute("BEGIN IMMEDIATE")
    cur.execute("COMMIT")
    return count


# --- timing ---------------------------------------------------------------------------------------


def fresh_target(folder: Path) -> apsw.Connection:
    folder.mkdir(parents=True)
    path = folder / "memory.db"
    conn = open_connection(path)
    migrate(conn, str(path))
    enable_wal(conn)
    return conn


def timed_rebuild(source_path: Path, folder: Path, variant: str) -> tuple[int, float, dict[str, str]]:
    """(events, seconds, table checksums) of one rebuild of ``variant`` into a fresh file."""
    source = open_connection(source_path, readonly=True)
    target = fresh_target(folder)
    try:
        source.execute("BEGIN")
        start = time.perf_counter()
        events = fold_log(source, target) if variant == "ours" else raw_rebuild(source, target)
        elapsed = time.perf_counter() - start
        source.execute("COMMIT")
        return events, elapsed, table_checksums(target)
    finally:
        source.close()
        target.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--facts", type=int, default=1_500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="10,000 messages, 300 facts, 2 rounds")
    parser.add_argument("--workdir", type=Path, default=None, help="kept afterwards")
    args = parser.parse_args(argv)
    if args.quick:
        args.messages, args.facts, args.rounds = 10_000, 300, 2
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="fermix-replay-bench-"))
    try:
        progress(f"building the source: {args.messages:,} messages, {args.facts:,} facts ...")
        source_path = build_source(workdir / "source", args.messages, args.facts)
        check = open_connection(source_path, readonly=True)
        live = table_checksums(check)
        kinds = dict(check.execute("SELECT kind, count(*) FROM events GROUP BY kind").fetchall())
        check.close()
        rates: dict[str, list[float]] = {"ours": [], "raw": []}
        identical = {"ours": True, "raw": True}
        for rnd in range(args.rounds):
            order = ["ours", "raw"] if rnd % 2 == 0 else ["raw", "ours"]
            for variant in order:
                events, seconds, sums = timed_rebuild(source_path, workdir / f"{variant}-{rnd}", variant)
                rate = events / seconds
                rates[variant].append(rate)
                identical[variant] = identical[variant] and sums == live
                shutil.rmtree(workdir / f"{variant}-{rnd}")
                progress(f"round {rnd + 1}: {variant} {rate:,.0f} events/s")
        start = time.perf_counter()
        full = replay_into(source_path, workdir / "replayed")
        full_s = time.perf_counter() - start
        ours, raw = statistics.median(rates["ours"]), statistics.median(rates["raw"])
        result = {
            "messages": args.messages, "facts": args.facts, "rounds": args.rounds, "events": sum(kinds.values()),
            "event_kinds": kinds,
            "ours_events_per_s": round(ours, 1), "raw_events_per_s": round(raw, 1),
            "per_round_events_per_s": {k: [round(v, 1) for v in vs] for k, vs in rates.items()},
            "replay_ratio": round(ours / raw, 3), "replay_target": 1.0,
            "ours_identical": identical["ours"], "raw_identical": identical["raw"],
            "replay_into_s": round(full_s, 2), "replay_into_identical": full["identical"],
        }
        verdict = "ok" if ours / raw >= 1.0 else "BELOW TARGET"
        print(f"replay: ours {ours:,.0f} events/s, raw batched rebuild loop {raw:,.0f} events/s"
              f" -> {ours / raw:.2f}x (target >= 1.0: {verdict})")
        print(f"identical to the source: ours {identical['ours']}, raw {identical['raw']}; whole replay_into"
              f" (rebuild + checksums + FTS integrity-check) {full_s:.1f} s, identical {full['identical']}")
        print(json.dumps(result))
        return 0
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("FERMIX_RECALL_BY_MEANING", "false")  # meaning only where asked for (ADR-0044)
    raise SystemExit(main())
