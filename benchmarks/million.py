"""A million messages: one home built through the import path, every figure beside raw SQLite.

The home holds ``--messages`` messages (default 1,000,000; ``--quick``: 100,000) over many
agents, owners and conversations (``append_and_recall``'s corpus: 1,000 messages per agent/owner
pair, 10 conversations each, interleaved in time), imported as SPEC §12 JSON Lines with
``MemorySystem.import_history`` in two parts: a tenth first (100,000 at full size), then the
rest, each followed by the background merging of the history index (waited for, and
reported). Beside it, the same lines go into a **raw** database: plain apsw, a bare schema (one
``messages`` table, an index on its conversation columns, an external-content FTS5 index on the
text), batched ``executemany`` — no log, no hash chain, no scope tokens. Reported, each beside
its raw counterpart measured in the same run:

* **recall**, conversation-scoped and owner-scoped (``source="history"``), p50/p95 over a few
  hundred Zipf-drawn queries asked in conversations of the first part, at the first size and at
  the full size (flat: the growth ratio should stay near 1). Counterparts: the same scope-token
  expression as bare SQL on the same file (the SQL floor), and the raw database's plain
  ``MATCH`` + ``WHERE`` on agent/owner/conversation (what a bare schema costs; tens of times
  slower, it runs once per query, the others three times);
* **compose_prompt**, cold (the first call for each of many conversations after opening; three
  passes, each opening the home afresh: the median pass's ratio, the thread's CPU-time ratio and
  a newcomer's, the first conversation of its owner) and warm (the same conversation again),
  beside a raw read of the same window (the conversation's state row and the columns of its
  messages a host needs to build the same request, plain apsw on the same file:
  ``turn_hooks.RAW_WINDOW``); the statements a cold and a warm one run (an exec trace) and
  whether the window statement's plan is seeks only;
* **before_turn** and **after_turn** when nothing is due (SPEC §13: < 1 ms), beside a raw read
  of the conversation's state row;
* **bytes per message**: the home's database (log + projections + indexes) over the raw one;
* **verify** (with its progress) beside a raw check of the same file: the chain walk (each
  payload digest and chained hash recomputed), a raw batched rebuild and the FTS5 integrity
  check (the rebuild is timed once: it is the replay's counterpart too); **replay**
  (``fold_log``) beside the raw batched rebuild (``replay.py``'s);
* **forget** of one owner beside a bare ``VACUUM`` of a copy of the same file (``forget.py``);
* **open**: seconds to open the home and the process's RSS after it, in a fresh interpreter,
  beside a fresh interpreter opening the raw database with apsw and reading one row.

Run (from the repository root)::

    .venv/bin/python benchmarks/million.py --quick              # 100,000 messages
    .venv/bin/python benchmarks/million.py                      # 1,000,000 messages
    .venv/bin/python benchmarks/million.py --messages 30000     # any size (>= 10,000)
    .venv/bin/python benchmarks/million.py --workdir DIR ...    # keep the home and the raw database
    .venv/bin/python benchmarks/million.py --workdir DIR --compose-only [--messages N | --quick]
                                                  # compose_prompt and the hooks only, on DIR's home

Progress goes to stderr; the LAST line of stdout is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import append_and_recall as aar
import apsw
import replay
import turn_hooks
from forget import vacuum_of_a_copy

from fermix_memory.adapters.sql.scope_tokens import owner_token
from fermix_memory.adapters.sqlite.connection import open_connection
from fermix_memory.adapters.sqlite.fts_query import quote_term

RAW_SCHEMA = """
CREATE TABLE messages(id INTEGER PRIMARY KEY, agent_id TEXT NOT NULL, owner_id TEXT NOT NULL,
  channel TEXT NOT NULL, chat_id TEXT NOT NULL, role TEXT NOT NULL, sender TEXT NOT NULL,
  content TEXT NOT NULL, trust TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE INDEX messages_conversation ON messages(agent_id, owner_id, channel, chat_id, created_at);
CREATE VIRTUAL TABLE messages_fts USING fts5(content, content='messages', content_rowid='id');
"""
RAW_INSERT = ("INSERT INTO messages(agent_id, owner_id, channel, chat_id, role, sender, content, trust, created_at)"
              " VALUES (?,?,?,?,?,?,?,?,?)")
RAW_CONVERSATION_RECALL = (
    "SELECT m.id, f.rank FROM messages_fts f JOIN messages m ON m.id = f.rowid WHERE messages_fts MATCH ?"
    " AND m.agent_id = ? AND m.owner_id = ? AND m.channel = ? AND m.chat_id = ? ORDER BY f.rank LIMIT 10")
RAW_OWNER_RECALL = (
    "SELECT m.id, f.rank FROM messages_fts f JOIN messages m ON m.id = f.rowid WHERE messages_fts MATCH ?"
    " AND m.agent_id = ? AND m.owner_id = ? ORDER BY f.rank LIMIT 10")
HOOK_RUNS = 500
WARM_RUNS = 300
COLD_CONVERSATIONS = 200

progress = aar.progress


# --- building ------------------------------------------------------------------------------------


def raw_load(conn: apsw.Connection, lines: Sequence[str]) -> float:
    """The same lines into the bare schema, ``IMPORT_BATCH_LINES`` per transaction."""
    start = time.perf_counter()
    for i in range(0, len(lines), aar.IMPORT_BATCH_LINES):
        rows = []
        for line in lines[i:i + aar.IMPORT_BATCH_LINES]:
            r = json.loads(line)
            rows.append((r["agent_id"], r["owner_id"], r["channel"], r["chat_id"], r["role"], r["sender"],
                         r["content"], r["trust"], r["created_at"]))
        with conn:
            first = conn.execute("SELECT coalesce(max(id), 0) FROM messages").fetchall()[0][0]
            conn.executemany(RAW_INSERT, rows)
            conn.execute("INSERT INTO messages_fts(rowid, content) SELECT id, content FROM messages WHERE id > ?",
                         (first,))
    return time.perf_counter() - start


def raw_database(path: Path) -> apsw.Connection:
    conn = open_connection(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(RAW_SCHEMA)
    return conn


def database_bytes(db: Path) -> int:
    conn = open_connection(db)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    finally:
        conn.close()
    return sum(p.stat().st_size for p in db.parent.glob(db.name + "*"))


# --- timing --------------------------------------------------------------------------------------


def interleaved(fns: dict[str, Callable[[Any], object]], items: Sequence[Any], repeats: int = 3,
                once: frozenset[str] = frozenset()) -> dict[str, dict[str, float]]:
    """p50/p95 (ms) per variant; each item runs every variant ``repeats`` times, interleaved in a
    rotating order, and counts the median of its repeats. The variants in ``once`` run once per
    item: a yardstick tens of times slower than ours, whose noise cannot move a ratio to it, and
    whose repeats would be most of the benchmark's time at a million."""
    names = list(fns)
    for item in items[: max(10, len(items) // 5)]:  # warm page and statement caches
        for name in names:
            fns[name](item)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for i, item in enumerate(items):
        runs: dict[str, list[float]] = {name: [] for name in names}
        for repeat in range(repeats):
            for name in names[i % len(names):] + names[: i % len(names)]:
                if repeat and name in once:
                    continue
                start = time.perf_counter_ns()
                fns[name](item)
                runs[name].append((time.perf_counter_ns() - start) / 1e6)
        for name in names:
            samples[name].append(statistics.median(runs[name]))
    return {name: {"p50": round(aar.percentile(s, 50), 4), "p95": round(aar.percentile(s, 95), 4)}
            for name, s in samples.items()}


def recall_figures(home: Path, raw_db: Path, queries: Sequence[aar.Query]) -> dict[str, dict[str, float]]:
    """Conversation- and owner-scoped recall: ours, its scope-token SQL on the same file, the raw
    database's MATCH + WHERE."""
    with aar.open_memory(home) as memory:
        same = open_connection(home / "memory.db", readonly=True)
        raw = open_connection(raw_db, readonly=True)
        try:
            def ours(scope: str) -> Callable[[aar.Query], object]:
                def run(q: aar.Query) -> object:
                    c = q.conversation
                    return memory.recall(q.text, agent_id=c.agent_id, owner_id=c.owner_id,
                                         conversation=(c.channel, c.chat_id), scope=scope, source="history")
                return run

            def owner_scoped(q: aar.Query) -> str:
                token = owner_token(q.conversation.agent_id, q.conversation.owner_id)
                return f"scope_tokens : {quote_term(token)} AND {q.terms}"

            def conv_raw(q: aar.Query) -> object:
                c = q.conversation
                return raw.execute(RAW_CONVERSATION_RECALL, (q.terms, c.agent_id, c.owner_id, c.channel,
                                                             c.chat_id)).fetchall()

            def owner_raw(q: aar.Query) -> object:
                c = q.conversation
                return raw.execute(RAW_OWNER_RECALL, (q.terms, c.agent_id, c.owner_id)).fetchall()

            conv = interleaved({
                "ours": ours("current"),
                "scope_sql": lambda q: same.execute(aar.RAW_SCOPED_SQL, (q.scoped,)).fetchall(),
                "raw": conv_raw}, queries, once=frozenset({"raw"}))
            owner = interleaved({
                "ours": ours("owner"),
                "scope_sql": lambda q: same.execute(aar.RAW_SCOPED_SQL, (owner_scoped(q),)).fetchall(),
                "raw": owner_raw}, queries, once=frozenset({"raw"}))
        finally:
            same.close()
            raw.close()
    return {**{f"conversation_{k}": v for k, v in conv.items()}, **{f"owner_{k}": v for k, v in owner.items()}}


def cold_pass(home: Path, convs: Sequence[aar.Conversation]
              ) -> tuple[tuple[float, float], tuple[float, float], float]:
    """One cold pass on the home opened afresh: the medians (ms) of ours and the raw read, wall
    clock and the thread's CPU time, over ``COLD_CONVERSATIONS`` conversations, alternating; and
    the CPU ratio of the medians over the newcomers' conversations (the first of their owner in
    the pass: ours reads the owner's prompt files too, one more statement)."""
    with aar.open_memory(home) as memory:
        raw = open_connection(home / "memory.db", readonly=True)
        try:
            samples: dict[str, list[tuple[float, float]]] = {"ours": [], "raw": []}

            def window(c: aar.Conversation) -> object:
                state = raw.execute(turn_hooks.RAW_STATE, (c.agent_id, c.channel, c.chat_id, "")).fetchall()
                return raw.execute(turn_hooks.RAW_WINDOW, (c.agent_id, c.channel, c.chat_id, "",
                                                           state[0][0] if state else 0)).fetchall()

            def compose(c: aar.Conversation) -> object:
                return memory.compose_prompt(c.agent_id, c.owner_id, (c.channel, c.chat_id))

            compose(convs[0])  # the owner's prompt files and the token counter, once
            owners = {convs[0].owner_id}
            for i, c in enumerate(convs[1:COLD_CONVERSATIONS + 1]):
                newcomer = c.owner_id not in owners  # ours reads the owner's files too
                owners.add(c.owner_id)
                for name in (("ours", "raw") if i % 2 else ("raw", "ours")):
                    start, cpu = time.perf_counter_ns(), time.thread_time_ns()
                    (compose if name == "ours" else window)(c)
                    samples[name].append(((time.perf_counter_ns() - start) / 1e6,
                                          (time.thread_time_ns() - cpu) / 1e6, newcomer))
        finally:
            raw.close()
    ours, theirs = samples["ours"], samples["raw"]
    return ((statistics.median(w for w, _, _ in ours), statistics.median(w for w, _, _ in theirs)),
            (statistics.median(c for _, c, _ in ours), statistics.median(c for _, c, _ in theirs)),
            (statistics.median(c for _, c, n in ours if n) / statistics.median(c for _, c, n in theirs if n)))


def cold_statements(home: Path, convs: Sequence[aar.Conversation]) -> dict[str, Any]:
    """Statements per cold ``compose_prompt`` (after the first, which reads the owner's files too)
    and per warm one, counted on every connection the composing thread uses (an exec trace set by
    ``apsw.connection_hooks``); and whether the window statement's plan is seeks only at this size."""
    import threading

    me, seen, on = threading.get_ident(), [], [False]

    def hook(conn: apsw.Connection) -> None:
        conn.exec_trace = lambda _c, sql, _b: (on[0] and threading.get_ident() == me and seen.append(sql)) or True

    apsw.connection_hooks.append(hook)
    try:
        with aar.open_memory(home) as memory:
            def compose(c: aar.Conversation) -> object:
                return memory.compose_prompt(c.agent_id, c.owner_id, (c.channel, c.chat_id))

            picked = convs[1:21]  # cold again: this process has composed none of them
            on[0] = True
            compose(convs[0])
            first, cold, warm = len(seen), [], []
            for rounds in (cold, warm):
                for c in picked:
                    before = len(seen)
                    compose(c)
                    rounds.append(len(seen) - before)
            on[0] = False
    finally:
        apsw.connection_hooks.remove(hook)
    c = convs[1]
    return {"first_compose_statements": first, "cold_compose_statements": round(statistics.mean(cold), 2),
            "cold_compose_statements_max": max(cold), "warm_compose_statements": round(statistics.mean(warm), 2),
            "window_plan_seeks_only": turn_hooks.plan_seeks_only(home, (c.agent_id, c.channel, c.chat_id, ""))}


def cold_figures(home: Path, convs: Sequence[aar.Conversation], passes: int = 3) -> dict[str, Any]:
    """The cold ``compose_prompt`` beside the raw read of its window, in ``passes`` passes each
    opening the home afresh: the median pass's figures (wall clock), each pass's ratio, and the
    median ratio of the thread's CPU time (which a loaded machine disturbs less)."""
    walls, cpus, newcomers = [], [], []
    for _ in range(passes):
        wall, cpu, newcomer = cold_pass(home, convs)
        walls.append(wall)
        cpus.append(cpu)
        newcomers.append(newcomer)
    ratios = [ours / theirs for ours, theirs in walls]
    middle = sorted(range(passes), key=ratios.__getitem__)[passes // 2]
    return {"cold_compose_ms": round(walls[middle][0], 4), "cold_raw_window_ms": round(walls[middle][1], 4),
            "cold_compose_ratio": round(ratios[middle], 2), "cold_compose_ratios": [round(r, 2) for r in ratios],
            "cold_compose_cpu_ratio": round(statistics.median(o / t for o, t in cpus), 2),
            "cold_newcomer_cpu_ratio": round(statistics.median(newcomers), 2),
            "cold_conversations": min(COLD_CONVERSATIONS, len(convs) - 1), **cold_statements(home, convs)}


def prompt_and_hooks(home: Path, convs: Sequence[aar.Conversation], passes: int = 3) -> dict[str, Any]:
    """Cold and warm ``compose_prompt`` and the turn hooks, each beside its raw read."""
    cold = cold_figures(home, convs, passes)
    with aar.open_memory(home) as memory:
        raw = open_connection(home / "memory.db", readonly=True)
        try:
            hot = convs[0]
            conversation = (hot.channel, hot.chat_id)

            def window() -> object:
                state = raw.execute(turn_hooks.RAW_STATE, (hot.agent_id, *conversation, "")).fetchall()
                return raw.execute(turn_hooks.RAW_WINDOW, (hot.agent_id, *conversation, "",
                                                           state[0][0] if state else 0)).fetchall()

            def compose() -> object:
                return memory.compose_prompt(hot.agent_id, hot.owner_id, conversation)

            compose()
            warm = {name: turn_hooks.timed(f, runs=WARM_RUNS) for name, f in (("ours", compose), ("raw", window))}
            memory.review_now(agent_id=hot.agent_id, owner_id=hot.owner_id, conversation=conversation)
            memory.wait_for_background()
            hooks = {
                "before_turn": turn_hooks.timed(lambda: memory.before_turn(
                    agent_id=hot.agent_id, owner_id=hot.owner_id, conversation=conversation), runs=HOOK_RUNS),
                "after_turn": turn_hooks.timed(lambda: memory.after_turn(
                    agent_id=hot.agent_id, owner_id=hot.owner_id, conversation=conversation,
                    peak_prompt_tokens=1_000), runs=HOOK_RUNS),
                "raw_state_read": turn_hooks.timed(lambda: raw.execute(
                    turn_hooks.RAW_STATE, (hot.agent_id, hot.channel, hot.chat_id, "")).fetchall(), runs=HOOK_RUNS),
            }
            memory.wait_for_background()
        finally:
            raw.close()
    return {
        **cold,
        "warm_compose_ms": warm["ours"]["p50_ms"], "warm_raw_window_ms": warm["raw"]["p50_ms"],
        "warm_compose_ratio": round(warm["ours"]["p50_ms"] / warm["raw"]["p50_ms"], 2),
        **{f"{k}_{m}": v for k, f in hooks.items() for m, v in f.items()},
        "hooks_under_1ms": all(hooks[k]["p95_ms"] < 1.0 for k in ("before_turn", "after_turn")),
    }


def raw_walk_and_check(db: Path) -> tuple[float, bool]:
    """Seconds for the raw counterpart of ``verify`` without its rebuild: walk the chain (payload
    digests and chained hashes recomputed) and check the FTS5 index. The raw rebuild, the third
    part, is timed once for both yardsticks: it is the replay's counterpart too."""
    start = time.perf_counter()
    source = open_connection(db)
    ok, prev = True, "0" * 64
    try:
        source.execute("BEGIN")
        for position, stream, version, kind, schema, recorded_at, payload, digest, prev_hash, hash_ in source.execute(
                "SELECT position, stream, version, kind, schema, recorded_at, payload, payload_sha256, prev_hash,"
                " hash FROM events ORDER BY position"):
            material = "\n".join((prev, str(position), stream, str(version), kind, str(schema), recorded_at, digest))
            ok = ok and prev_hash == prev and hashlib.sha256(payload.encode()).hexdigest() == digest \
                and hashlib.sha256(material.encode()).hexdigest() == hash_
            prev = hash_
        source.execute("COMMIT")
        source.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 0)")
    finally:
        source.close()
    return time.perf_counter() - start, ok


OPEN_PROBE = """
import json, sys, time
start = time.perf_counter()
{body}
elapsed = time.perf_counter() - start
rss = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmRSS:"))
print(json.dumps({{"open_s": elapsed, "rss_mb": rss / 1024}}))
"""
OURS_OPEN = ("from fermix_memory import MemorySystem\nm = MemorySystem.open(sys.argv[1])\n"
             "m.compose_prompt('agent-0000', 'owner-0000', ('slack', 'chat-0000-00'))")
RAW_OPEN = ("import apsw\nc = apsw.Connection(sys.argv[1])\n"
            "c.execute(\"SELECT * FROM messages WHERE agent_id = 'agent-0000' LIMIT 50\").fetchall()")


def open_figures(home: Path, raw_db: Path, rounds: int = 3) -> dict[str, float]:
    """Fresh interpreters: seconds from before the import of the library to an opened home that
    composed one prompt, and RSS then; the same for apsw reading one window of the raw file."""
    got: dict[str, list[dict[str, float]]] = {"ours": [], "raw": []}
    for r in range(rounds):
        for name in (("ours", "raw") if r % 2 == 0 else ("raw", "ours")):
            body, target = (OURS_OPEN, home) if name == "ours" else (RAW_OPEN, raw_db)
            out = subprocess.run([sys.executable, "-c", OPEN_PROBE.format(body=body), str(target)],
                                 check=True, capture_output=True, text=True).stdout
            got[name].append(json.loads(out.strip().splitlines()[-1]))
    med = {name: {k: statistics.median(x[k] for x in v) for k in ("open_s", "rss_mb")} for name, v in got.items()}
    return {"open_s": round(med["ours"]["open_s"], 3), "raw_open_s": round(med["raw"]["open_s"], 3),
            "rss_after_open_mb": round(med["ours"]["rss_mb"], 1),
            "raw_rss_after_open_mb": round(med["raw"]["rss_mb"], 1)}


# --- main ----------------------------------------------------------------------------------------


def compose_only(home: Path, first: int, total: int, passes: int) -> int:
    """``compose_prompt`` and the hooks on a home built by an earlier run (its conversations
    are found again from the sizes: the measured ones are the first part's)."""
    parts = [aar.conversations_for(range(0, first // aar.MESSAGES_PER_AGENT)),
             aar.conversations_for(range(first // aar.MESSAGES_PER_AGENT, total // aar.MESSAGES_PER_AGENT))]
    progress(f"compose_prompt and turn hooks on {home} ({total:,} messages)")
    hooks = prompt_and_hooks(home, [*parts[0], *parts[1]], passes)
    print(f"  compose_prompt cold {hooks['cold_compose_ms']:.3f} ms ({hooks['cold_compose_ratio']}x raw window,"
          f" passes {hooks['cold_compose_ratios']}, CPU {hooks['cold_compose_cpu_ratio']}x; a newcomer's CPU"
          f" {hooks['cold_newcomer_cpu_ratio']}x), warm"
          f" {hooks['warm_compose_ms']:.3f} ms ({hooks['warm_compose_ratio']}x); statements: first"
          f" {hooks['first_compose_statements']}, cold {hooks['cold_compose_statements']}, warm"
          f" {hooks['warm_compose_statements']}; plan seeks only {hooks['window_plan_seeks_only']}")
    print(json.dumps({"messages": total, **hooks}))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--messages", type=int, default=None, help="home size (default 1,000,000; --quick 100,000)")
    p.add_argument("--quick", action="store_true", help="100,000 messages")
    p.add_argument("--queries", type=int, default=200, help="recall queries per scope (default 200)")
    p.add_argument("--workdir", type=Path, default=None, help="where the databases go (kept afterwards)")
    p.add_argument("--compose-only", action="store_true",
                   help="with --workdir of a home built before (same --messages): only compose_prompt and the hooks")
    p.add_argument("--passes", type=int, default=3, help="cold compose passes, each opening the home afresh")
    args = p.parse_args(argv)
    total = args.messages or (100_000 if args.quick else 1_000_000)
    if total < 10 * aar.MESSAGES_PER_AGENT:
        p.error(f"--messages must be >= {10 * aar.MESSAGES_PER_AGENT}")
    first = 100_000 if total >= 1_000_000 else total // 10
    if args.compose_only:
        if args.workdir is None or not (args.workdir / "home" / "memory.db").exists():
            p.error("--compose-only needs the --workdir of a home built before")
        return compose_only(args.workdir / "home", first, total, args.passes)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="fermix-million-"))
    workdir.mkdir(parents=True, exist_ok=True)
    home, raw_db = workdir / "home", workdir / "raw" / "raw.db"
    raw_db.parent.mkdir(exist_ok=True)
    began = time.perf_counter()
    try:
        corpus = aar.Corpus(random.Random(aar.SEED))
        parts = [aar.conversations_for(range(0, first // aar.MESSAGES_PER_AGENT)),
                 aar.conversations_for(range(first // aar.MESSAGES_PER_AGENT, total // aar.MESSAGES_PER_AGENT))]
        queries = aar.make_queries(corpus, parts[0], args.queries, aar.SEED + 3)
        raw = raw_database(raw_db)
        ours_s = raw_s = settle_s = 0.0
        recall: dict[int, dict[str, dict[str, float]]] = {}
        size = 0
        for n, convs in enumerate(parts):
            lines = aar.history_lines(corpus, convs, aar.SEED + 10 + n, aar.EPOCH + timedelta(days=400 * n))
            progress(f"importing part {n + 1}/2: {len(lines):,} messages")
            with aar.open_memory(home) as memory:
                ours_s += aar.import_lines(memory, lines)
                start = time.perf_counter()
                memory.wait_for_background()  # the index merged, as a service's background has done by then
                settle_s += time.perf_counter() - start
            raw_s += raw_load(raw, lines)
            size += len(lines)
            progress(f"{size:,} messages; recall, {len(queries)} queries x 2 scopes x 3 variants")
            recall[size] = recall_figures(home, raw_db, queries)
            progress(f"recall at {size:,}: {json.dumps(recall[size])}")  # kept should a later step fail
        raw.close()
        built_s = time.perf_counter() - began
        db = home / "memory.db"
        ours_bytes, raw_bytes = database_bytes(db), database_bytes(raw_db)

        progress("verify")
        last = [0.0]

        def report(done: int, all_: int) -> None:
            if time.perf_counter() - last[0] > 5:
                last[0] = time.perf_counter()
                progress(f"  verify {done:,}/{all_:,}")

        with aar.open_memory(home) as memory:
            start = time.perf_counter()
            verified = memory.verify(report)
            verify_s = time.perf_counter() - start
        progress("raw chain walk + index check")
        raw_walk_s, raw_chain_ok = raw_walk_and_check(db)
        progress("replay: fold_log and the raw batched rebuild")
        check = open_connection(db, readonly=True)
        live = replay.table_checksums(check)
        check.close()
        replay_rates, replay_s, identical = {}, {}, {}
        for name in ("ours", "raw"):
            events, replay_s[name], sums = replay.timed_rebuild(db, workdir / f"replay-{name}", name)
            replay_rates[name], identical[name] = events / replay_s[name], sums == live
            shutil.rmtree(workdir / f"replay-{name}")
        # verify's yardstick: the raw walk and index check, and the raw rebuild just timed
        raw_verify_s = raw_walk_s + replay_s["raw"]

        progress("open time and RSS")
        opened = open_figures(home, raw_db)
        progress("compose_prompt and turn hooks")
        # the review it runs adds events: after replay
        hooks = prompt_and_hooks(home, [*parts[0], *parts[1]], args.passes)
        progress("forget one owner, and a bare VACUUM of a copy")
        vacuum_s = vacuum_of_a_copy(home, workdir / "copy")
        shutil.rmtree(workdir / "copy")
        victim = parts[-1][-1]
        with aar.open_memory(home) as memory:
            start = time.perf_counter()
            forgot = memory.forget_owner(victim.owner_id, agent_id=victim.agent_id)
            forget_s = time.perf_counter() - start
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    small, full = recall[min(recall)], recall[max(recall)]

    def scoped(scope: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for at, figs in recall.items():
            k = f"{at // 1000}k"
            for variant in ("ours", "scope_sql", "raw"):
                for m in ("p50", "p95"):
                    out[f"{scope}_recall_{variant}_{m}_ms_{k}"] = figs[f"{scope}_{variant}"][m]
        out[f"{scope}_recall_p95_growth"] = round(full[f"{scope}_ours"]["p95"] / small[f"{scope}_ours"]["p95"], 2)
        out[f"{scope}_recall_p95_to_scope_sql"] = round(full[f"{scope}_ours"]["p95"]
                                                        / full[f"{scope}_scope_sql"]["p95"], 2)
        out[f"{scope}_recall_p95_to_raw"] = round(full[f"{scope}_ours"]["p95"] / full[f"{scope}_raw"]["p95"], 3)
        return out

    result: dict[str, Any] = {
        "messages": size, "sizes": sorted(recall), "agents": size // aar.MESSAGES_PER_AGENT,
        "conversations": sum(len(c) for c in parts), "queries": len(queries),
        "import_msgs_per_s": round(size / ours_s, 1), "raw_load_msgs_per_s": round(size / raw_s, 1),
        "import_to_bare_load_ratio": round(raw_s / ours_s, 3), "index_settle_s": round(settle_s, 1),
        **scoped("conversation"), **scoped("owner"),
        **hooks,
        "bytes_per_message": round(ours_bytes / size, 1), "raw_bytes_per_message": round(raw_bytes / size, 1),
        "bytes_ratio": round(ours_bytes / raw_bytes, 2),
        **opened,
        "verify_s": round(verify_s, 2), "verify_ok": verified.ok, "raw_verify_s": round(raw_verify_s, 2),
        "raw_chain_ok": raw_chain_ok, "verify_ratio": round(verify_s / raw_verify_s, 2),
        "replay_events_per_s": round(replay_rates["ours"], 1),
        "raw_rebuild_events_per_s": round(replay_rates["raw"], 1),
        "replay_ratio": round(replay_rates["ours"] / replay_rates["raw"], 3),
        "replay_identical": identical["ours"], "raw_rebuild_identical": identical["raw"],
        "forget_owner_s": round(forget_s, 2), "vacuum_s": round(vacuum_s, 2),
        "forget_to_vacuum_ratio": round(forget_s / vacuum_s, 2),
        "forget_erased_events": sum(forgot.erased_events.values()),
        "build_s": round(built_s, 1), "total_s": round(time.perf_counter() - began, 1),
    }
    print(f"{size:,} messages, {result['agents']:,} agents/owners, {result['conversations']:,} conversations;"
          f" import {result['import_msgs_per_s']:,.0f} msg/s ({result['import_to_bare_load_ratio']:.2f}x bare load),"
          f" then {settle_s:.1f} s of background index merging")
    for scope in ("conversation", "owner"):
        for at in sorted(recall):
            f = recall[at]
            print(f"  {scope} recall at {at:,}: ours p50 {f[f'{scope}_ours']['p50']:.3f} p95"
                  f" {f[f'{scope}_ours']['p95']:.3f} ms; scope SQL p95 {f[f'{scope}_scope_sql']['p95']:.3f};"
                  f" raw MATCH+WHERE p95 {f[f'{scope}_raw']['p95']:.3f}")
    print(f"  compose_prompt cold {hooks['cold_compose_ms']:.3f} ms ({hooks['cold_compose_ratio']}x raw window,"
          f" CPU {hooks['cold_compose_cpu_ratio']}x, statements {hooks['cold_compose_statements']}),"
          f" warm {hooks['warm_compose_ms']:.3f} ms ({hooks['warm_compose_ratio']}x);"
          f" before_turn p95 {hooks['before_turn_p95_ms']:.3f} ms, after_turn p95 {hooks['after_turn_p95_ms']:.3f} ms")
    print(f"  {result['bytes_per_message']:.0f} bytes/message vs raw {result['raw_bytes_per_message']:.0f}"
          f" ({result['bytes_ratio']}x); open {result['open_s']:.2f} s, RSS {result['rss_after_open_mb']:.0f} MB"
          f" (raw {result['raw_open_s']:.2f} s, {result['raw_rss_after_open_mb']:.0f} MB)")
    print(f"  verify {verify_s:.1f} s ({result['verify_ratio']}x raw walk+rebuild+check); replay"
          f" {result['replay_ratio']}x raw rebuild; forget one owner {forget_s:.1f} s"
          f" ({result['forget_to_vacuum_ratio']}x VACUUM); total {result['total_s']:.0f} s")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("FERMIX_RECALL_BY_MEANING", "false")  # meaning only where asked for (ADR-0044)
    sys.exit(main())
